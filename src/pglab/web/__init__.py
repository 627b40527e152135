"""The course chapter's demos: `pglab serve` (server.py), their JSON API (api.py), and the page (static/)."""
