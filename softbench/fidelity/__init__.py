"""`softbench fidelity`: next-token NLL of a frozen causal LM with exact against approximate attention.

models.py (offline model resolution and loading) · corpus.py and rlazyload.py (texts, tokens, aligned blocks) ·
operators_zoo.py (the named weight maps) · conditions.py (what one run compares) · attention.py (the attention
maths and its routing through transformers) · nll.py (FP32 language-model head, block NLL, vocabulary-output
divergences) · local_eval.py (every condition in this process) · kernel_eval.py and kernel_worker.py (FA4 A0/A1,
one process each) · summary.py (paired block bootstrap, session tables) · engine.py (blocks, session, resume)."""
