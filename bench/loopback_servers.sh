# Sourced by the network benchmarks: a private airlockd home (the host's images and kernel,
# bench.test resolving to 127.0.0.1 and admitted by the ceiling), and loopback servers for it:
# plain HTTP on $http_port serving $home/www (a $mb MiB blob and a small file), and HTTPS on 443
# for bench.test with a throwaway CA ($home/ca.pem) that airlockd trusts for intercepted hosts.
# Everything is removed on exit. Needs python3, curl and openssl on the host.
command -v python3 >/dev/null && command -v curl >/dev/null && command -v openssl >/dev/null ||
  { echo "$0: needs python3, curl and openssl on the host (apt-get install python3 curl openssl)" >&2; exit 1; }
. bench/private_home.sh
printf 'allow *:*\nallow 127.0.0.1/32:*\n' > "$home/ceiling"
printf '127.0.0.1 bench.test\n' > "$home/hosts"
export AIRLOCK_EGRESS_CEILING=$home/ceiling AIRLOCK_EGRESS_HOSTS=$home/hosts
export AIRLOCK_UPSTREAM_CA=$home/ca.pem
servers=()
cleanup_extra() {
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
}

mb=${mb:-64}
mkdir "$home/www"
head -c $((mb * 1024 * 1024)) /dev/urandom > "$home/www/blob"
echo small > "$home/www/small"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$home/ca.key" -out "$home/ca.pem" -days 1 \
  -subj /CN=bench-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$home/tls.key" -out "$home/tls.csr" \
  -subj /CN=bench.test 2>/dev/null
printf 'subjectAltName=DNS:bench.test\n' > "$home/tls.ext"
openssl x509 -req -in "$home/tls.csr" -CA "$home/ca.pem" -CAkey "$home/ca.key" -CAcreateserial \
  -out "$home/tls.pem" -days 1 -extfile "$home/tls.ext" 2>/dev/null
http_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$home/www" "$http_port" >/dev/null 2>&1 &
servers+=($!)
python3 - "$home" >/dev/null 2>&1 <<'PY' &
import http.server, ssl, sys, functools
home = sys.argv[1]
class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real APIs
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=home + "/www", **kwargs)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 443), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(home + "/tls.pem", home + "/tls.key")
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
PY
servers+=($!)
sleep 1
