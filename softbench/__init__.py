"""softbench: honest measurements of softmax approximations inside fused attention kernels."""

__version__ = "0.1.0"
