"""What a SavedModel's graph can do outside the model: ops that reach files, network, process.

A SavedModel holds no Python, but its graph is code: ``tf.io.write_file`` in a serving
function writes a file each time the model runs, a ``ReadFile`` reads one, a resource
initializer runs while the model is *loaded*. :func:`scan_graph` walks every node of the
MetaGraph and of every function in its library and lists the ops of :data:`IO_OPS`, each
with the function that holds it and whether loading runs it (resource creators and
initializers, restore functions, the TF1 init op) or only calling the model does.

The saver's own ``SaveV2``/``RestoreV2``/``MergeV2Checkpoints`` are not reported when they
sit where TensorFlow puts them (the functions the ``saver_def`` calls, or the nodes that
feed it in a TF1 graph): they read and write the model's own ``variables/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

_WRITES = "writes files"
_READS = "reads files"
_NETWORK = "talks to other machines"
_PROCESS = "runs code or acts on the process outside the graph"


def _ops(action: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, action)


IO_OPS: dict[str, str] = {
    **_ops(
        _WRITES,
        "WriteFile",
        "Save",
        "SaveV2",
        "SaveSlices",
        "MergeV2Checkpoints",
        "SaveDataset",
        "SaveDatasetV2",
        "DistributedSave",
        "DatasetToTFRecord",
        "ExperimentalDatasetToTFRecord",
        "CacheDataset",
        "CacheDatasetV2",
        "SnapshotDataset",
        "SnapshotDatasetV2",
        "CalibrationStatisticsSaver",
        "CreateSummaryFileWriter",
        "CreateSummaryDbWriter",
        "SummaryWriter",
        "WriteSummary",
        "WriteScalarSummary",
        "WriteHistogramSummary",
        "WriteImageSummary",
        "WriteAudioSummary",
        "WriteGraphSummary",
        "WriteRawProtoSummary",
        "FlushSummaryWriter",
        "CloseSummaryWriter",
        "ImportEvent",
        "StatsAggregatorSetSummaryWriter",
        "DebugIdentity",
        "DebugIdentityV2",
        "DebugIdentityV3",
        "DebugNanCount",
        "DebugNumericSummary",
        "DebugNumericSummaryV2",
    ),
    **_ops(
        _READS,
        "ReadFile",
        "MatchingFiles",
        "Restore",
        "RestoreV2",
        "RestoreSlice",
        "DTensorRestoreV2",
        "ImmutableConst",
        "InitializeTableFromTextFile",
        "InitializeTableFromTextFileV2",
        "LoadAndRemapMatrix",
        "LoadDataset",
        "TFRecordDataset",
        "TFRecordDatasetV2",
        "FixedLengthRecordDataset",
        "FixedLengthRecordDatasetV2",
        "TextLineDataset",
        "CSVDataset",
        "CSVDatasetV2",
        "ExperimentalCSVDataset",
        "LMDBDataset",
        "ExperimentalLMDBDataset",
        "MatchingFilesDataset",
        "ExperimentalMatchingFilesDataset",
        "SnapshotDatasetReader",
        "SnapshotNestedDatasetReader",
        "SnapshotChunkDataset",
        "ListSnapshotChunksDataset",
        "SqlDataset",
        "ExperimentalSqlDataset",
        "WholeFileReader",
        "WholeFileReaderV2",
        "TextLineReader",
        "TextLineReaderV2",
        "TFRecordReader",
        "TFRecordReaderV2",
        "FixedLengthRecordReader",
        "FixedLengthRecordReaderV2",
        "LMDBReader",
        "FileSystemSetConfiguration",
    ),
    **_ops(
        _NETWORK,
        "RemoteCall",
        "RpcClient",
        "RpcCall",
        "RpcServer",
        "RpcServerRegister",
        "RpcServerStart",
        "DataServiceDataset",
        "DataServiceDatasetV2",
        "DataServiceDatasetV3",
        "DataServiceDatasetV4",
        "RegisterDataset",
        "RegisterDatasetV2",
        "Send",
        "Recv",
        "_Send",
        "_Recv",
        "_HostSend",
        "_HostRecv",
        "CollectiveAllToAllV2",
        "CollectiveAllToAllV3",
        "CollectiveAssignGroupV2",
        "CollectiveBcastRecv",
        "CollectiveBcastRecvV2",
        "CollectiveBcastSend",
        "CollectiveBcastSendV2",
        "CollectiveGather",
        "CollectiveGatherV2",
        "CollectiveInitializeCommunicator",
        "CollectivePermute",
        "CollectiveReduce",
        "CollectiveReduceScatterV2",
        "CollectiveReduceV2",
        "CollectiveReduceV3",
        "NcclAllReduce",
        "NcclBroadcast",
        "NcclReduce",
    ),
    **_ops(_PROCESS, "PyFunc", "PyFuncStateless", "EagerPyFunc"),
}
"""Ops that act outside the model, by name, with what they do (TensorFlow 2.21's op list)."""

# The saver's own I/O, allowed where the saver_def puts it (the model's variables/).
_SAVE_OPS = ("Save", "SaveV2", "SaveSlices", "MergeV2Checkpoints")
_RESTORE_OPS = ("Restore", "RestoreV2", "RestoreSlice")
# Ops whose file access depends on an attribute: (attribute, values that stay in memory).
_ATTR_IO = {
    "PrintV2": ("output_stream", None),  # "file://..." writes a file; stderr/stdout/log do not
    "DecodeProtoV2": ("descriptor_source", ("local://", "bytes://")),
    "EncodeProto": ("descriptor_source", ("local://", "bytes://")),
}
# Children of a resource in the object graph that tf.saved_model.load calls.
_LOAD_TIME_CHILDREN = frozenset({"_create_resource", "_initialize"})
_GRAPH = "the main graph"


@dataclass(frozen=True)
class GraphOp:
    """One op of a SavedModel graph that reaches outside the model.

    Attributes:
        op: The op type, e.g. ``"WriteFile"``.
        action: What it does, e.g. ``"writes files"``.
        where: The function that holds it (or ``"the main graph"``).
        at_load: True when loading the SavedModel runs it; False when only calling does.
    """

    op: str
    action: str
    where: str
    at_load: bool

    def describe(self) -> str:
        """The op, what it does and where, for a message."""
        place = self.where if self.where == _GRAPH else f"function {self.where}"
        return f"{self.op} ({self.action}) in {place}"


def scan_graph(meta_graph: Any) -> tuple[GraphOp, ...]:
    """Every op of ``meta_graph`` that acts outside the model, loading-time ones first."""
    graph = meta_graph.graph_def
    functions = {f.signature.name: f for f in graph.library.function}
    nodes = {node.name: node for node in graph.node}
    calls = {name: set(_called(f.node_def, functions)) for name, f in functions.items()}

    load_roots = set(_load_time_functions(meta_graph))
    init = _ancestors(nodes, _init_outputs(meta_graph))
    load_roots.update(_called((nodes[n] for n in init), functions))
    at_load = _closure(load_roots, calls)
    callable_ = _closure(_callable_functions(meta_graph), calls)
    saver = meta_graph.saver_def
    save_nodes = _ancestors(nodes, [saver.save_tensor_name])
    restore_nodes = _ancestors(nodes, [saver.restore_op_name])
    save_all = _closure(_called((nodes[n] for n in save_nodes), functions), calls)
    restore_all = _closure(_called((nodes[n] for n in restore_nodes), functions), calls)
    # The saver's functions excuse its own ops only where nothing else can call them.
    excused = {
        **dict.fromkeys(_SAVE_OPS, (save_nodes, save_all - callable_ - at_load)),
        **dict.fromkeys(_RESTORE_OPS, (restore_nodes, restore_all - callable_ - at_load)),
    }
    has_object_graph = len(meta_graph.object_graph_def.nodes) > 0
    reachable = callable_ | at_load | save_all | restore_all

    found: dict[tuple[str, str], GraphOp] = {}
    for node in graph.node:
        action = _io_action(node)
        if action is None or node.name in excused.get(node.op, ((), ()))[0]:
            continue
        # A TF1 graph (no object graph) runs its nodes from the session the loader builds.
        at_load_here = not has_object_graph or node.name in init
        found.setdefault((node.op, _GRAPH), GraphOp(node.op, action, _GRAPH, at_load_here))
    for name, function in functions.items():
        for node in function.node_def:
            action = _io_action(node)
            if action is None or name in excused.get(node.op, ((), ()))[1]:
                continue
            # A function nothing reachable calls may be called in ways not modelled here:
            # it counts as run at load, the cautious side.
            loaded = name in at_load or name not in reachable
            found.setdefault((node.op, name), GraphOp(node.op, action, name, loaded))
    return tuple(sorted(found.values(), key=lambda op: (not op.at_load, op.where, op.op)))


def _io_action(node: Any) -> str | None:
    action = IO_OPS.get(node.op)
    if action is not None:
        return action
    rule = _ATTR_IO.get(node.op)
    if rule is None:
        return None
    attribute, in_memory = rule
    value = node.attr[attribute].s.decode("utf-8", "replace") if attribute in node.attr else ""
    if node.op == "PrintV2":
        return _WRITES if value.startswith("file://") else None
    if in_memory is not None and (not value or value.startswith(in_memory)):
        return None
    return _READS


def _called(nodes: Iterable[Any], functions: dict[str, Any]) -> Iterator[str]:
    """Names of the library functions ``nodes`` call.

    A node calls a function through any function attribute (``f``, ``then_branch``,
    ``body``, ``branches``...) or by having the function's name as its op type.
    """
    for node in nodes:
        if node.op in functions:
            yield node.op
        for value in node.attr.values():
            if value.HasField("func"):
                yield value.func.name
            if value.HasField("list"):
                yield from (f.name for f in value.list.func)


def _closure(roots: Iterable[str], calls: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    pending = [r for r in roots if r in calls]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(c for c in calls.get(name, ()) if c in calls and c not in seen)
    return seen


def _node_name(tensor: str) -> str:
    return tensor.lstrip("^").split(":", 1)[0]


def _ancestors(nodes: dict[str, Any], outputs: Iterable[str]) -> set[str]:
    """The main-graph nodes ``outputs`` depend on (data and control inputs), themselves too."""
    seen: set[str] = set()
    pending = [_node_name(t) for t in outputs if t]
    while pending:
        name = pending.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        pending.extend(_node_name(i) for i in nodes[name].input)
    return seen


def _init_outputs(meta_graph: Any) -> list[str]:
    """The TF1 init ops a loader runs: ``__saved_model_init_op`` and the legacy collections."""
    outputs = [t.name for t in meta_graph.signature_def["__saved_model_init_op"].outputs.values()]
    for key in ("saved_model_main_op", "legacy_init_op", "table_initializer", "init_op"):
        if key in meta_graph.collection_def:
            outputs.extend(meta_graph.collection_def[key].node_list.value)
    return outputs


def _load_time_functions(meta_graph: Any) -> Iterator[str]:
    """Functions of the object graph that ``tf.saved_model.load`` calls while loading."""
    graph_nodes = meta_graph.object_graph_def.nodes
    for node in graph_nodes:
        for child in node.children:
            if node.WhichOneof("kind") == "resource" and child.local_name in _LOAD_TIME_CHILDREN:
                yield from _functions_of(graph_nodes, child.node_id)
        for saveable in node.saveable_objects.values():
            yield from _functions_of(graph_nodes, saveable.restore_function)
            yield from _functions_of(graph_nodes, saveable.save_function)


def _callable_functions(meta_graph: Any) -> Iterator[str]:
    """Every function the object graph exposes to callers, and the signatures' functions."""
    graph_nodes = meta_graph.object_graph_def.nodes
    for index in range(len(graph_nodes)):
        yield from _functions_of(graph_nodes, index)


def _functions_of(graph_nodes: Any, index: int) -> Iterator[str]:
    if not 0 <= index < len(graph_nodes):
        return
    node = graph_nodes[index]
    kind = node.WhichOneof("kind")
    if kind == "function":
        yield from node.function.concrete_functions
    elif kind == "bare_concrete_function":
        yield node.bare_concrete_function.concrete_function_name
    for child in node.children:
        child_node = graph_nodes[child.node_id] if 0 <= child.node_id < len(graph_nodes) else None
        if child_node is not None and child_node.WhichOneof("kind") == "bare_concrete_function":
            yield child_node.bare_concrete_function.concrete_function_name
