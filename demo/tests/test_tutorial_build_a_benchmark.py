"""docs/tutorials/build-a-benchmark.md, walked as its reader would: every command of the page, in order, in one
shell (lib.docs_testing): import, sanity checks in the sandbox, candidates diagnosed by the demo judge, a
reviewer's bulk acceptance through the API of the app on loopback, freezing and export. `make demo` is the one line
it stands in for: the demo server fixture, the admin and the example tasks that `make run` makes."""

import tarfile

import pytest
from django.core.management import call_command

from accounts.roles import ADMIN
from accounts.testing import make_user
from benchmarks.models import BenchmarkVersion
from demo.tests.test_demo_evaluation import EXAMPLES
from jobs.testing import database_url
from lib.docs_testing import DOCS, walk
from review.models import BenchmarkCandidate, LLMDiagnosis
from tasks.importing import import_path

pytestmark = [pytest.mark.once, pytest.mark.usefixtures("bwrap", "taxonomy")]

PAGE = DOCS / "tutorials" / "build-a-benchmark.md"


def test_the_benchmark_tutorial_runs_to_its_end(live_server_asgi, demo_server, tmp_path):
    import_path(EXAMPLES)  # what `make run` loads
    make_user("admin", ADMIN)  # what `make run` creates
    call_command("demo_models", "--setup")  # what `make demo` runs before serving
    walked = walk(
        PAGE,
        tmp_path,
        env={
            "DATABASE_URL": database_url(),
            "CLAWGYM_PROXY_PUBLIC_URL": live_server_asgi.url,
            "CLAWGYM": live_server_asgi.url,
        },
        stand_ins={"make demo": "the demo_server fixture, an admin, the example tasks and the demo's setup"},
    )

    candidates = BenchmarkCandidate.objects.filter(benchmark__name="office-basics")
    assert candidates.count() == 6
    assert LLMDiagnosis.objects.filter(candidate__in=candidates).count() == 6
    assert set(candidates.values_list("status", flat=True)) == {BenchmarkCandidate.Status.ACCEPTED}, walked.stdout
    [version] = BenchmarkVersion.objects.filter(benchmark__name="office-basics")  # beside the demo's own
    assert version.number == 1 and version.revisions.count() == 6

    with tarfile.open(tmp_path / "var" / "office-basics.tar.gz") as archive:
        names = archive.getnames()
    assert any(name.endswith("benchmark.json") for name in names)
    assert sum(name.endswith("/data_entry.json") for name in names) == 6
