"""Base models in the admin: listed, searched, and added by path through the same service as the page (a folder
validated, its architecture read from config.json). Converting a shipped model is the Base models page's."""

from django import forms
from django.contrib import admin

from . import base_models
from .models import BaseModel


class BaseModelForm(forms.ModelForm):
    class Meta:
        model = BaseModel
        fields = ["name", "path", "chat_template", "notes"]

    def clean(self):
        data = super().clean()
        if data.get("path") and (self.instance.pk is None or "path" in self.changed_data):
            try:
                self.facts = base_models.folder_facts(data["path"])
            except base_models.BaseModelError as exc:
                self.add_error("path", str(exc))
        return data


@admin.register(BaseModel)
class BaseModelAdmin(admin.ModelAdmin):
    form = BaseModelForm
    list_display = ["name", "architecture", "context_length", "path", "created_at"]
    search_fields = ["name", "path", "architecture"]
    readonly_fields = ["architecture", "context_length", "created_at"]

    def save_model(self, request, obj, form, change):
        for key, value in getattr(form, "facts", {}).items():
            setattr(obj, key, value)
        super().save_model(request, obj, form, change)
