"""The recording proxy's OpenAI-compatible routes, mounted at /proxy/ (the token is the only credential)."""

from django.urls import path

from . import proxy

urlpatterns = [
    path("<str:token>/v1/chat/completions", proxy.chat_completions, name="proxy-chat-completions"),
    path("<str:token>/v1/responses", proxy.responses, name="proxy-responses"),
    path("<str:token>/v1/models", proxy.models, name="proxy-models"),
]
