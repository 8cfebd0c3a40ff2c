"""Load the starting taxonomy. After this it is data: edit it in the Django admin."""

from django.db import migrations

BENCHMARK_CATEGORIES = [
    ("productivity-collaboration", "Productivity & Collaboration",
     "Office documents, email and calendars, meeting notes, shared trackers and team coordination."),
    ("systems-automation", "Systems & Automation",
     "Shell scripting, configuration, logs, scheduled jobs, file organisation and batch processing."),
    ("analysis-reasoning", "Analysis & Reasoning",
     "Data analysis, calculations, comparisons, multi-step deduction over the given files."),
    ("content-domain-support", "Content & Domain Support",
     "Writing, editing and domain-specific work: legal, medical, financial, educational content."),
    ("planning-knowledge-management", "Planning & Knowledge Management",
     "Plans, schedules, notes, knowledge bases, checklists and structured personal information."),
    ("software-development", "Software Development",
     "Reading, fixing, testing and documenting code and build configuration."),
]

SCENARIOS = {
    ("office-work", "Office Work"): [
        ("spreadsheets", "Spreadsheets and tabular reports"),
        ("documents", "Document drafting and formatting"),
        ("presentations", "Presentation outlines and slide notes"),
        ("expense-reports", "Expenses and reimbursements"),
        ("inventory", "Inventory and asset tracking"),
    ],
    ("communication", "Communication"): [
        ("email-triage", "Email triage and replies"),
        ("meeting-notes", "Meeting notes and action items"),
        ("announcements", "Announcements and newsletters"),
        ("customer-support", "Customer support responses"),
    ],
    ("messaging", "Messaging and Chat"): [
        ("chat-summaries", "Chat thread summaries"),
        ("notification-rules", "Notification and alert rules"),
        ("contact-management", "Contacts and address books"),
        ("message-templates", "Message templates and canned replies"),
    ],
    ("research", "Research"): [
        ("literature-notes", "Literature notes and citations"),
        ("source-comparison", "Comparing sources and claims"),
        ("survey-synthesis", "Survey and interview synthesis"),
        ("fact-checking", "Fact checking against given material"),
    ],
    ("data-analysis", "Data Analysis"): [
        ("cleaning", "Data cleaning and validation"),
        ("aggregation", "Aggregation and pivot summaries"),
        ("financial-analysis", "Budgets and financial analysis"),
        ("metrics-reporting", "KPI and metrics reports"),
        ("log-analysis", "Log and event analysis"),
    ],
    ("automation", "Automation"): [
        ("file-organisation", "File organisation and renaming"),
        ("batch-conversion", "Batch format conversion"),
        ("scheduled-jobs", "Scheduled jobs and cron"),
        ("workflow-scripts", "Workflow scripts"),
        ("templating", "Generating files from templates"),
    ],
    ("software-development", "Software Development"): [
        ("bug-fixing", "Bug fixing"),
        ("testing", "Writing and repairing tests"),
        ("refactoring", "Refactoring"),
        ("code-documentation", "Code documentation"),
        ("dependency-management", "Dependencies and build configuration"),
    ],
    ("systems", "Systems and Operations"): [
        ("configuration", "Service configuration"),
        ("monitoring", "Monitoring and health checks"),
        ("backups", "Backups and retention"),
        ("access-control", "Users, permissions and access control"),
    ],
    ("planning", "Planning and Scheduling"): [
        ("travel", "Travel itineraries"),
        ("project-plans", "Project plans and milestones"),
        ("event-planning", "Event planning"),
        ("personal-knowledge", "Personal knowledge bases and notes"),
    ],
    ("reasoning", "Reasoning and Problem Solving"): [
        ("constraint-puzzles", "Constraint satisfaction and scheduling puzzles"),
        ("decision-analysis", "Decision analysis and trade-offs"),
        ("estimation", "Estimation and calculation"),
    ],
    ("professional-domains", "Professional Domains"): [
        ("legal", "Legal documents and contracts"),
        ("healthcare", "Healthcare administration"),
        ("education", "Teaching and course material"),
        ("real-estate", "Real estate and property"),
        ("hr-recruiting", "HR and recruiting"),
    ],
}


def load(apps, schema_editor):
    BenchmarkCategory = apps.get_model("tasks", "BenchmarkCategory")
    ScenarioCategory = apps.get_model("tasks", "ScenarioCategory")
    ScenarioSubcategory = apps.get_model("tasks", "ScenarioSubcategory")
    for order, (slug, name, description) in enumerate(BENCHMARK_CATEGORIES):
        BenchmarkCategory.objects.update_or_create(
            slug=slug, defaults={"name": name, "description": description, "order": order}
        )
    for (slug, name), subs in SCENARIOS.items():
        category, _ = ScenarioCategory.objects.update_or_create(slug=slug, defaults={"name": name})
        for sub_slug, sub_name in subs:
            ScenarioSubcategory.objects.update_or_create(category=category, slug=sub_slug, defaults={"name": sub_name})


def unload(apps, schema_editor):
    apps.get_model("tasks", "ScenarioCategory").objects.filter(slug__in=[s for s, _ in SCENARIOS]).delete()
    apps.get_model("tasks", "BenchmarkCategory").objects.filter(
        slug__in=[s for s, _, _ in BENCHMARK_CATEGORIES], tasks__isnull=True
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("tasks", "0001_initial")]
    operations = [migrations.RunPython(load, unload)]
