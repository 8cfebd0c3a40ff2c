"""The `sitecustomize` module put on the checker's PYTHONPATH. Python imports it at start-up in every process of the
checker run; it acts only in the one whose script is reward/check.py (compared by file identity, so `python3
reward/check.py`, `cd reward && python check.py` and `python3 "$here/check.py"` all count), where it copies what
the script writes to sys.stdout (text and bytes) to CLAWGYM_CHECK_CAPTURE as well. What reward.sh receives is
unchanged. It then runs the sitecustomize it hides, if the interpreter has one (Debian's does). In every process it
also makes the runtime's modules win over same-named files in the workspace (_RuntimeFirst).

This file is not imported by ClawGym: tasks.verification copies it into the workspace (reward/.clawgym/) before each
checker run. It runs on the runtime's Python with the standard library alone; never import it here.
"""

import os
import sys

# Keep equal to tasks.verification.CAPTURE_BYTES (a test checks).
CAPTURE_BYTES = 256 * 1024


class _Copy:
    def __init__(self, stream, sink, encode):
        self._stream, self._sink, self._encode = stream, sink, encode

    def write(self, data):
        written = self._stream.write(data)
        try:
            if self._sink.tell() < CAPTURE_BYTES:
                self._sink.write(self._encode(data))
                self._sink.flush()
        except (OSError, ValueError, TypeError):
            pass
        return written

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _TextCopy(_Copy):
    @property
    def buffer(self):
        return _Copy(self._stream.buffer, self._sink, bytes)


def _capture():
    script = os.environ.get("CLAWGYM_CHECK_SCRIPT")
    target = os.environ.get("CLAWGYM_CHECK_CAPTURE")
    if not (script and target and sys.argv and sys.argv[0]) or sys.stdout is None:
        return
    try:
        if not os.path.samefile(sys.argv[0], script):
            return
        sink = open(target, "ab")
    except OSError:
        return
    # What check.py runs (the agent's scripts, say) is not told where the copy goes.
    os.environ.pop("CLAWGYM_CHECK_CAPTURE", None)
    sys.stdout = _TextCopy(sys.stdout, sink, lambda text: str(text).encode("utf-8", "replace"))


def _hidden_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


# A module the runtime has is imported from the runtime, never from the workspace being judged. `python3 -c ...`
# and `python3 -m ...` put the working folder (the workspace) first on sys.path, so an agent that leaves a `json.py`
# there would otherwise run inside ClawGym's own averager and choose the printed score. This finder sits just
# before the standard path finder and searches sys.path without the workspace's folders; what it does not find
# there (the checker's helpers, the agent's own modules) is left to the normal search.
class _RuntimeFirst:
    def __init__(self, workspace):
        self.workspace = workspace
        self.seen = {}

    def _outside(self, entry):
        folder = os.path.abspath(entry or os.curdir)
        if folder not in self.seen:
            self.seen[folder] = self._walk(folder)
        return self.seen[folder]

    def _walk(self, folder):
        while True:
            try:
                if os.path.samefile(folder, self.workspace):  # by inode: the workspace is mounted at two paths
                    return False
            except OSError:
                pass
            parent = os.path.dirname(folder)
            if parent == folder:
                return True
            folder = parent

    def find_spec(self, name, path=None, target=None):
        if path is not None or name in sys.builtin_module_names:
            return None  # a submodule is found by its package; builtins by the builtin importer
        import importlib.machinery

        runtime = [entry for entry in sys.path if isinstance(entry, str) and self._outside(entry)]
        return importlib.machinery.PathFinder.find_spec(name, runtime, target)


def _guard_imports():
    import importlib.machinery

    workspace = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    finders = sys.meta_path
    at = next((i for i, f in enumerate(finders) if f is importlib.machinery.PathFinder), len(finders))
    finders.insert(at, _RuntimeFirst(workspace))


_guard_imports()
_capture()
_hidden_sitecustomize()
