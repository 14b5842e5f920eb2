"""A minimal firmware ``main()`` for an exported model: the measured arena and one inference.

``OUT_main.cc`` declares the tensor arena at the size measured with TFLM on the host (the
smallest that allocated plus :data:`~.arena.MARGIN`, or the size the user gave), registers
the model's ops through ``OUT_ops.h``, allocates, fills every input with the value that
means 0.0 (the zero point of an int8 or int16 input; 0 bytes otherwise), runs one
inference and prints the arena TFLM used, the board's own answer to "how big must it be".
It is an example to start a board project from, written as TFLM's ``hello_world`` is: it
uses only the API of ``micro_interpreter.h``, ``micro_log.h``, ``system_setup.h`` and the
schema header.
"""

from __future__ import annotations

import textwrap


def render_main(
    name: str, header: str, ops_header: str, arena: int, arena_note: str, op_count: int
) -> str:
    """The text of ``OUT_main.cc``."""
    comment = textwrap.fill(
        f"The tensor arena: {arena_note}.", 92, initial_indent="// ", subsequent_indent="// "
    )
    return f"""\
// One inference of {name} with TFLite Micro: a minimal firmware main (tfcompress export-c).
// Build it in a board project that has TFLite Micro (docs/mcu.md: the compile command,
// Arduino and Zephyr), with the array's .cc beside it.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "{header}"
#include "{ops_header}"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_log.h"
#include "tensorflow/lite/micro/system_setup.h"
#include "tensorflow/lite/schema/schema_generated.h"

namespace {{
{comment}
constexpr std::size_t kArenaSize = {arena};
alignas(16) std::uint8_t tensor_arena[kArenaSize];
}}  // namespace

int main() {{
  tflite::InitializeTarget();
  const tflite::Model* model = tflite::GetModel({name});
  if (model->version() != TFLITE_SCHEMA_VERSION) {{
    MicroPrintf("the model's schema is version %d, TFLite Micro reads %d",
                static_cast<int>(model->version()), TFLITE_SCHEMA_VERSION);
    return 1;
  }}
  static {name}_op_resolver resolver;  // the {op_count} op(s) the model uses
  if ({name}_register_ops(resolver) != kTfLiteOk) return 1;
  static tflite::MicroInterpreter interpreter(model, resolver, tensor_arena, kArenaSize);
  if (interpreter.AllocateTensors() != kTfLiteOk) {{
    MicroPrintf("AllocateTensors failed: kArenaSize is too small for this board's kernels");
    return 1;
  }}
  // Your sample goes here, quantized as q = x / scale + zero_point (input->params).
  // This example feeds 0.0 everywhere: the zero point of an int8/int16 input, else 0.
  for (std::size_t i = 0; i < interpreter.inputs_size(); ++i) {{
    TfLiteTensor* input = interpreter.input(i);
    if (input->type == kTfLiteInt8) {{
      std::memset(input->data.int8, input->params.zero_point, input->bytes);
    }} else if (input->type == kTfLiteInt16) {{
      for (std::size_t j = 0; j < input->bytes / sizeof(std::int16_t); ++j) {{
        input->data.i16[j] = static_cast<std::int16_t>(input->params.zero_point);
      }}
    }} else {{
      std::memset(input->data.raw, 0, input->bytes);
    }}
  }}
  if (interpreter.Invoke() != kTfLiteOk) {{
    MicroPrintf("Invoke failed");
    return 1;
  }}
  const TfLiteTensor* output = interpreter.output(0);
  MicroPrintf("output 0: %d bytes; arena used %d of %d bytes", static_cast<int>(output->bytes),
              static_cast<int>(interpreter.arena_used_bytes()), static_cast<int>(kArenaSize));
  return 0;
}}
"""
