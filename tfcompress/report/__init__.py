"""Report: tables, versioned JSON, CSV, Markdown and plots."""
