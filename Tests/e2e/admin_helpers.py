"""Reading the admin listener from tests."""
import json
import urllib.error
import urllib.request


def admin_get(port, path, method="GET", headers=None):
    """A request to the admin listener, as `chainwatch ctl` makes it (a POST carries X-Chainwatch-Admin: 1 unless
    `headers` says otherwise)."""
    if headers is None:
        headers = {"X-Chainwatch-Admin": "1"} if method == "POST" else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def admin_get_json(port, path):
    status, text = admin_get(port, path)
    assert status == 200, (status, text)
    return json.loads(text)
