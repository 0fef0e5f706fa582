"""A server for the transparent-mode tests, run inside the server namespace (`ip netns exec NS python3 netns_server.py
...`): HTTPS with a given chain and TLS version, or plain HTTP, on [::]:PORT for IPv4 and IPv6 alike. Every GET
answers `hello from upstream`. It prints `ready` once listening and serves until killed (the test stops it by PID)."""
import argparse
import socket
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = b"hello from upstream\n"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):
        pass


class DualStack(ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--tls", choices=["1.2", "1.3"], default="1.3")
    args = parser.parse_args()
    server = DualStack(("::", args.port), Handler)
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[args.tls]
        ctx.minimum_version = ctx.maximum_version = version
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
