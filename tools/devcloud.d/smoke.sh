#!/usr/bin/env bash
# The end-to-end check of docs/devcloud.md, with the openstack CLI as a
# person would type it: alice builds a network, a server, a router with a
# gateway on `public`, a floating IP, a volume attached and detached; bob
# does not see alice's server.  Everything it makes is deleted at the end
# (also when a step fails).  Run after `tools/devcloud up`:
#   bash tools/devcloud.d/smoke.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(tools/devcloud env)"
A=(openstack --os-cloud devcloud-alice)
B=(openstack --os-cloud devcloud-bob)
ADMIN=(openstack --os-cloud devcloud-admin)
P=smoke$$
T0=$(date +%s.%N)
step() { printf '[%6.1fs] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*"; }
fail() { echo "SMOKE FAILED: $*" >&2; exit 1; }

cleanup() {
  set +e
  "${A[@]}" server remove volume "$P-s1" "$P-v1" >/dev/null 2>&1
  for i in $(seq 30); do
    st=$("${A[@]}" volume show "$P-v1" -f value -c status 2>/dev/null) || break
    [ "$st" = in-use ] || [ "$st" = detaching ] || break; sleep 1
  done
  "${A[@]}" volume delete "$P-v1" >/dev/null 2>&1
  [ -n "${FIP:-}" ] && "${A[@]}" floating ip delete "$FIP" >/dev/null 2>&1
  "${A[@]}" server delete --wait "$P-s1" "$P-s2" >/dev/null 2>&1
  "${A[@]}" port delete "$P-port" >/dev/null 2>&1
  "${A[@]}" router remove subnet "$P-r1" "$P-sub" >/dev/null 2>&1
  "${A[@]}" router delete "$P-r1" >/dev/null 2>&1
  "${A[@]}" network delete "$P-net" >/dev/null 2>&1
  step "cleaned up"
}
trap cleanup EXIT

step "network, subnet"
"${A[@]}" network create "$P-net" -f value -c id >/dev/null
"${A[@]}" subnet create --network "$P-net" --subnet-range 10.99.0.0/24 "$P-sub" -f value -c id >/dev/null

step "server create --wait"
st=$("${A[@]}" server create --flavor m1.tiny --image cirros --network "$P-net" "$P-s1" --wait -f value -c status)
[ "$st" = ACTIVE ] || fail "server status $st"
step "server ACTIVE"

step "port binds"
"${A[@]}" port create --network "$P-net" "$P-port" -f value -c id >/dev/null
"${ADMIN[@]}" port set --host devcloud-compute1 "$P-port"
vif=$("${ADMIN[@]}" port show "$P-port" -f value -c binding_vif_type)
pst=$("${ADMIN[@]}" port show "$P-port" -f value -c status)
[ "$vif" = ovs ] || fail "port binding vif_type $vif"
srvport=$("${A[@]}" port list --server "$P-s1" -f value -c ID)
svif=$("${ADMIN[@]}" port show "$srvport" -f value -c binding_vif_type)
[ "$svif" = ovs ] || fail "server port vif_type $svif"
step "ports bound (vif_type $vif, status $pst; server port $svif)"

step "router with gateway public and an interface on the subnet"
"${A[@]}" router create "$P-r1" -f value -c id >/dev/null
"${A[@]}" router set --external-gateway public "$P-r1"
"${A[@]}" router add subnet "$P-r1" "$P-sub"
gw=$("${A[@]}" router show "$P-r1" -f json -c external_gateway_info)
echo "$gw" | grep -q ip_address || fail "router has no gateway IP: $gw"

step "floating IP from public, associated to the server's port"
FIP=$("${A[@]}" floating ip create public -f value -c floating_ip_address)
"${A[@]}" server add floating ip "$P-s1" "$FIP"
fport=$("${A[@]}" floating ip show "$FIP" -f value -c port_id)
[ "$fport" = "$srvport" ] || fail "floating IP on port $fport, not $srvport"
step "floating IP $FIP on $fport ($("${A[@]}" floating ip show "$FIP" -f value -c status))"

step "volume create"
"${A[@]}" volume create --size 1 "$P-v1" -f value -c id >/dev/null
for i in $(seq 60); do
  st=$("${A[@]}" volume show "$P-v1" -f value -c status)
  [ "$st" = available ] && break; [ "$st" = error ] && fail "volume error"; sleep 1
done
[ "$st" = available ] || fail "volume status $st"
step "volume available; attaching"
"${A[@]}" server add volume "$P-s1" "$P-v1" >/dev/null
for i in $(seq 60); do
  st=$("${A[@]}" volume show "$P-v1" -f value -c status)
  [ "$st" = in-use ] && break; sleep 1
done
[ "$st" = in-use ] || fail "volume status after attach: $st"
step "volume in-use; extending it while attached (3.42)"
"${A[@]}" --os-volume-api-version 3.42 volume set --size 2 "$P-v1"
for i in $(seq 30); do
  sz=$("${A[@]}" volume show "$P-v1" -f value -c size)
  [ "$sz" = 2 ] && break; sleep 1
done
[ "$sz" = 2 ] || fail "volume size after extend: $sz"
step "volume extended; detaching"
"${A[@]}" server remove volume "$P-s1" "$P-v1"
for i in $(seq 60); do
  st=$("${A[@]}" volume show "$P-v1" -f value -c status)
  [ "$st" = available ] && break; sleep 1
done
[ "$st" = available ] || fail "volume status after detach: $st"
"${A[@]}" volume delete "$P-v1"
for i in $(seq 60); do
  "${A[@]}" volume show "$P-v1" >/dev/null 2>&1 || break; sleep 1
done
"${A[@]}" volume show "$P-v1" >/dev/null 2>&1 && fail "volume not deleted"
step "volume detached and deleted"

n=$("${B[@]}" server list -f value -c ID | grep -c . || true)
"${B[@]}" server list -f value -c Name | grep -q "$P-s1" && fail "bob sees alice's server"
step "bob sees $n servers, not alice's"
echo "SMOKE OK"
