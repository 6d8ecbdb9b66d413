#!/usr/bin/env bash
# mTLS: the appliance serves TLS on 127.0.0.1 with --tls-cert/--tls-key and requires client
# certificates signed by --tls-client-ca. Certificates are made here with the openssl CLI:
# a CA, a server certificate (SAN 127.0.0.1, localhost), a client certificate from the CA
# and one from another CA. Expected: no client certificate -> rejected; a certificate of the
# other CA -> rejected; plaintext -> rejected; the right certificate -> works.
source "$(dirname "$0")/common.sh" "$@"
command -v openssl >/dev/null || skip "openssl CLI not found (apt-get install openssl)"

P=$WORK/pki
mkdir -p "$P"
ossl() { openssl "$@" 2>>"$P/openssl.log" >/dev/null || fail "openssl $1 failed: $(tail -5 "$P/openssl.log")"; }
mkca() {  # mkca NAME
  ossl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$P/$1.key" -out "$P/$1.pem"
}
mkcert() {  # mkcert NAME CA EXT
  ossl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$P/$1.key" -out "$P/$1.csr"
  printf '%s\n' "$3" >"$P/$1.ext"
  ossl x509 -req -in "$P/$1.csr" -CA "$P/$2.pem" -CAkey "$P/$2.key" -CAcreateserial -days 2 \
    -extfile "$P/$1.ext" -out "$P/$1.pem"
}
mkca ca
mkca otherca
mkcert server ca "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
mkcert client ca "extendedKeyUsage=clientAuth"
mkcert intruder otherca "extendedKeyUsage=clientAuth"
openssl verify -CAfile "$P/ca.pem" "$P/client.pem" >/dev/null || fail "client cert does not verify"
if openssl verify -CAfile "$P/ca.pem" "$P/intruder.pem" >/dev/null 2>&1; then
  fail "intruder cert verifies against the CA"
fi

start_appliance "$WORK/state" --listen 127.0.0.1:0 --tls-cert "$P/server.pem" \
  --tls-key "$P/server.key" --tls-client-ca "$P/ca.pem"
[[ $APP_ADDR =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "address '$APP_ADDR'"

rc=0; "$DPUCTL" --server "$APP_ADDR" --tls-ca "$P/ca.pem" status >/dev/null 2>"$WORK/nocert.err" || rc=$?
[[ $rc -ne 0 ]] || fail "a client without a certificate was served"
pass "no client certificate: rejected (exit $rc: $(head -1 "$WORK/nocert.err"))"

rc=0; "$DPUCTL" --server "$APP_ADDR" --tls-ca "$P/ca.pem" --tls-cert "$P/intruder.pem" \
  --tls-key "$P/intruder.key" status >/dev/null 2>"$WORK/other.err" || rc=$?
[[ $rc -ne 0 ]] || fail "a client certificate from another CA was accepted"
pass "certificate of another CA: rejected (exit $rc)"

rc=0; "$DPUCTL" --server "$APP_ADDR" status >/dev/null 2>"$WORK/plain.err" || rc=$?
[[ $rc -ne 0 ]] || fail "plaintext client was served"
pass "plaintext client: rejected (exit $rc)"

# The client also checks the server: a CA that did not sign the server certificate fails.
rc=0; "$DPUCTL" --server "$APP_ADDR" --tls-ca "$P/otherca.pem" --tls-cert "$P/client.pem" \
  --tls-key "$P/client.key" status >/dev/null 2>/dev/null || rc=$?
[[ $rc -ne 0 ]] || fail "client accepted a server certificate its CA did not sign"
pass "server certificate checked by the client"

"$DPUCTL" --server "$APP_ADDR" --tls-ca "$P/ca.pem" --tls-cert "$P/client.pem" \
  --tls-key "$P/client.key" status >"$WORK/ok.out" 2>"$WORK/ok.err" || fail "valid client rejected: $(cat "$WORK/ok.err")"
grep -q "^instance" "$WORK/ok.out" || fail "status over mTLS: $(cat "$WORK/ok.out")"
"$DPUCTL" --server "localhost:${APP_ADDR##*:}" --tls-ca "$P/ca.pem" --tls-cert "$P/client.pem" \
  --tls-key "$P/client.key" config set dataplane.timeouts.udp_s=77 >/dev/null || fail "config set over mTLS"
pass "valid client certificate: served"

stop_appliance
echo "PASS $TEST_NAME"
