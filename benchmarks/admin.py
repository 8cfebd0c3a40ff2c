"""Benchmarks in the Django admin. Frozen versions are immutable: the admin may look, not edit."""

from django.contrib import admin

from .models import Benchmark, BenchmarkVersion


@admin.register(Benchmark)
class BenchmarkAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


@admin.register(BenchmarkVersion)
class BenchmarkVersionAdmin(admin.ModelAdmin):
    list_display = ["benchmark", "number", "frozen_at", "created_by"]
    list_filter = ["benchmark"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
