"""Sans-I/O wire codecs: bytes <-> typed frames, one package per protocol, both roles."""
