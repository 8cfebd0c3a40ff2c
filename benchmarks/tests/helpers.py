"""Plain helpers shared by the benchmark tests."""

from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package


def make_task(external_id="t-plain", instruction="Summarise sales.csv into report.md."):
    package = TaskPackage(
        external_id=external_id,
        instruction=instruction,
        files=[
            PackageFile("sales.csv", b"item,amount\na,1\n"),
            PackageFile("reward.sh", b"python3 reward/check.py\n", role="reward"),
            PackageFile("check.py", b"import json\nprint(json.dumps({'report_exists': 0}))\n", role="reward"),
        ],
    )
    return save_package(package).task
