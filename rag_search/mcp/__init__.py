"""The MCP server: its tools, resources, arguments and HTTP transport (the assistants' interface)."""
