"""attnlab.grading.sandbox becomes a package: this step moves sandbox.py whole to mechanisms.py (so that its history
follows); the next splits it into one module per job."""
# ruff: noqa: F401

from .mechanisms import (
                         BWRAP,
                         ENV_MECHANISM,
                         ENV_UIDS,
                         MECHANISMS,
                         NONE,
                         SETPRIV,
                         UNSHARE,
                         Bubblewrap,
                         IsolationReport,
                         Limits,
                         Mechanism,
                         NoIsolation,
                         Sandboxed,
                         SetprivOnly,
                         Unshare,
                         _availability,
                         _kind,
                         _others_cannot_run,
                         available,
                         private_paths,
                         probe,
                         python_paths,
                         run_once,
                         shutil,
                         spawn,
)
