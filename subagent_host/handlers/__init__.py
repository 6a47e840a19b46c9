"""One thin module per JSON-RPC method: check what types cannot, call `runs`, convert the result."""
