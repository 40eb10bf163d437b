"""The public speech API: REST views (speech, jobs, discovery), the request serializers and their
OpenAPI description, and the WebSocket protocols. It calls the service; it never imports the
worker side or torch."""
