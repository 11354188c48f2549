"""Kernel backends and variants. A variant is a named kernel semantics (A0 stock, A1 Rowmax-H15, controls);
a backend is one implementation of those semantics (FA4 on the GPU, the pure-torch simulation anywhere)."""
