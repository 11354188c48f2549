"""The two numbers below which a fidelity run would not mean what it says; light, so --help can name them."""

# The fewest complete blocks for which a percentile bootstrap interval is given. The percentile interval of a
# mean is about mean +- 1.96 * s * sqrt((n-1)/n) / sqrt(n), where the t interval it stands in for needs
# t(n-1, 0.975) * s / sqrt(n); for normal per-block differences its real coverage of a nominal 95% is then
# 60% at 2 blocks, 81% at 4, 90% at 10, 92.9% at 20, 94.6% at 97 (the paper's count). From 20 blocks on, the
# miss rate is within 1.5x the nominal 5%; below that an interval (and "resolved") says more than the data do
# (the 2- and 4-block "resolved" results vanished at 4 and 14 blocks).
MIN_BLOCKS = 20

# The wiring check compares a mean over L-1 predictions: softbench's FP32 head against the model's own BF16
# logits, which differ by up to ~0.1 nats at single positions. Measured on SmolLM2-135M (Austen, 3 blocks each, SDPA as the reference):
# |difference| 0.009-0.14 at L = 2..8, <= 0.006 at 16, <= 0.0055 at 32, <= 0.0031 at 64; the gate's 0.02 fails
# at 2 (issue 16: 15.99 vs 15.97). 32 keeps a margin of more than 3x.
MIN_BLOCK_LEN = 32
