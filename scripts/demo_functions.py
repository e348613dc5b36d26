"""Print what each function of the demo chain did, from `sfclab inspect --json` on stdin."""

import json
import sys

nodes = json.load(sys.stdin)["nodes"]
fw = nodes["fw"]["function"]["hooks"]["forward"]
for r in fw["rules"]:
    print(f"firewall: rule {r['rule']} matched {r['packets']} packets")
print(f"firewall: {fw['policy']['packets']} packets passed on the policy")
nat = nodes["nat"]["function"]
print(f"nat: masquerading on {nat['interface']} toward {nat['outside']}: "
      f"{nat['connections']['masquerade']['packets']} connections translated")
sh = nodes["shaper"]["function"]
for ifname, q in sh["interfaces"].items():
    print(f"shaper: {sh['discipline']} at {sh['rate_bps'] / 1e6:.0f} Mbit/s on {ifname}: "
          f"{q['packets']} packets, {q['overlimits']} overlimits, {q['drops']} drops")
dpi = nodes["dpi"]["function"]
for f in dpi.get("flows", []):
    print(f"dpi: {f.get('protocol', '?'):<12} {f.get('src', '')}:{f.get('sport', '')} -> "
          f"{f.get('dst', '')}:{f.get('dport', '')} {f.get('packets', 0)} packets")
