"""Static analysis of relay source: admission, lint, flow graph, annotations, layout (pure)."""
