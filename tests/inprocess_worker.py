"""A worker that runs in the test's own process, for tests of what a command records rather than of its
processes (tests/test_runtime.py and the slow end-to-end tests cover those)."""


class InProcessRunner:
    """A worker that runs in this process (softbench.runtime.worker.WorkerState without the pipe), so that
    operators registered by the test are visible to it, and no interpreter has to start and import torch."""

    def __init__(self, label, backend, variant, options=None):
        from softbench.runtime.worker import WorkerState

        self.label, self.backend, self.variant, self.options = label, backend, variant, options or {}
        self.state = WorkerState()
        self.info = {}

    def load(self):
        self.info = self.state.load({"backend": self.backend, "variant": self.variant, "options": self.options})
        return self.info

    def request(self, op, **fields):
        return {"ok": True, "result": getattr(self.state, op)(fields)}

    def close(self):
        pass
