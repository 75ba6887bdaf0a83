"""Messages between engines: oslo.messaging RPC to the workers
(`rpc.py`) and the in-process transport of the embedded default
(`inproc.py`)."""
