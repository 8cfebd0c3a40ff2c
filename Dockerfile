FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt requirements-nodeps.txt ./
RUN pip install --no-cache-dir -r requirements.txt && pip install --no-cache-dir --no-deps -r requirements-nodeps.txt
COPY . .
ENV DJANGO_SETTINGS_MODULE=clawgym_site.settings PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["uvicorn", "clawgym_site.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--http", "clawgym_site.http_timeouts:HttpToolsProtocol", "--timeout-keep-alive", "5"]
