"""No secret reaches an output (issue 19, finding 16).

A judge base URL with a password in its user-info and an API key in its query, an API key in the
environment, a Redis URL with a password: real runs against the project's test server and a real
redis-server, with every output there is (terminal, logs at DEBUG, the JSON and HTML reports,
JUnit XML, the saved run, a shard report and its merge, the SQLite cache, the cache CLI). Each
test asserts that no secret is anywhere, and that the redacted form is shown where the URL is (so
that it cannot pass by showing nothing).
"""

from __future__ import annotations

import base64
from urllib.parse import quote

PASSWORD = "s3cretpass"


URL_KEY = "SECRETKEY123"


ENV_KEY = "sk-envKEY-7f3a9c2e51"


#: what the server is told by the user-info (HTTP basic auth), base64 in a header
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()


SECRETS = (PASSWORD, URL_KEY, ENV_KEY, BASIC, quote(ENV_KEY, safe=""))
