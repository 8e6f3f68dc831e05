import { assertEquals } from "../../tests/assert.ts";
import { renderJson, renderTable, summaryLine } from "./render.ts";
import type { DoctorReport } from "./types.ts";
import { expectedMasq } from "./checks/iptables.ts";
import { chainPolicy, chainRules } from "../observe/probes.ts";

const report: DoctorReport = {
  summary: {
    status: "CRITICAL",
    ok: 1,
    warning: 1,
    critical: 1,
    unknown: 1,
    skipped: ["hairpin"],
    exitCode: 2,
    netns: "blue",
  },
  checks: [
    {
      id: "mtu",
      severity: "critical",
      detail: "flannel.1 MTU 1500 > eth0 1500 - 50; cni0 MTU 1500 != 1450",
      why: "drops",
      fix: ["ip link set flannel.1 mtu 1450", "ip link set cni0 mtu 1450"],
      persist: ["restart"],
    },
    { id: "rp-filter", severity: "warning", detail: "rp_filter strict (1) on eth0", why: "w", fix: ["x"] },
    {
      id: "vxlan-csum-offload",
      severity: "unknown",
      detail: "ethtool is not installed",
      fix: ["apt-get install ethtool"],
    },
    { id: "ip-forward", severity: "ok", detail: "net.ipv4.ip_forward = 1" },
  ],
};

Deno.test("render: summary line, problems with why/fix/persist, multi-part details split, ok lines", () => {
  assertEquals(
    summaryLine(report),
    "DOCTOR CRITICAL: 1 critical, 1 warning, 1 unknown, 1 ok (netns blue), skipped hairpin",
  );
  assertEquals(
    renderTable(report),
    [
      "DOCTOR CRITICAL: 1 critical, 1 warning, 1 unknown, 1 ok (netns blue), skipped hairpin",
      "",
      "CRITICAL  mtu                 flannel.1 MTU 1500 > eth0 1500 - 50",
      "                              cni0 MTU 1500 != 1450",
      "          why:     drops",
      "          fix:     ip link set flannel.1 mtu 1450",
      "                   ip link set cni0 mtu 1450",
      "          persist: restart",
      "",
      "WARNING   rp-filter           rp_filter strict (1) on eth0",
      "          why:     w",
      "          fix:     x",
      "",
      "UNKNOWN   vxlan-csum-offload  ethtool is not installed",
      "                              hint: apt-get install ethtool",
      "OK        ip-forward          net.ipv4.ip_forward = 1",
      "",
    ].join("\n"),
  );
});

Deno.test("render: json has summary and checks with id, severity, detail, fix", () => {
  const doc = JSON.parse(renderJson(report));
  assertEquals(doc.summary.exitCode, 2);
  assertEquals(Object.keys(doc.checks[0]), ["id", "severity", "detail", "fix", "why", "persist"]);
  assertEquals(Object.keys(doc.summary), [
    "status",
    "ok",
    "warning",
    "critical",
    "unknown",
    "skipped",
    "exitCode",
    "netns",
  ]);
  // An explicit view: what the report carries beyond the contract is not printed.
  const internal = { ...report, summary: { ...report.summary, gatheredMs: 12 } };
  assertEquals(Object.keys(JSON.parse(renderJson(internal)).summary).includes("gatheredMs"), false);
  assertEquals(doc.checks[3], {
    id: "ip-forward",
    severity: "ok",
    detail: "net.ipv4.ip_forward = 1",
    fix: [],
    why: null,
    persist: [],
  });
});

Deno.test("iptables helpers: policies, chain rules, flannel's masquerade rules", () => {
  const filter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [3:180]\n-A FORWARD -j FLANNEL-FWD\n" +
    "-A FLANNEL-FWD -s 10.244.0.0/16 -j ACCEPT\nCOMMIT\n";
  assertEquals(chainPolicy(filter, "FORWARD"), "DROP");
  assertEquals(chainPolicy(filter, "OUTPUT"), null);
  assertEquals(chainRules(filter, "FLANNEL-FWD"), ["-A FLANNEL-FWD -s 10.244.0.0/16 -j ACCEPT"]);
  const m = expectedMasq("10.244.0.0/16", "10.244.1.0/24");
  assertEquals(m.length, 6);
  assertEquals(
    m[4],
    '-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully',
  );
});

Deno.test("render: long fix lists are cut in the table, kept in json", () => {
  const fix = Array.from({ length: 30 }, (_, i) => `rm /var/lib/cni/networks/cbr0/10.244.1.${i + 3}`);
  const r: DoctorReport = {
    ...report,
    checks: [{ id: "hostlocal-ips", severity: "warning", detail: "30 leaked IP(s)", why: "w", fix }],
  };
  const lines = renderTable(r).split("\n");
  assertEquals(lines.filter((l) => l.includes("rm /var/lib/cni")).length, 11);
  assertEquals(lines.includes("                   … 19 more (see -o json)"), true);
  assertEquals(JSON.parse(renderJson(r)).checks[0].fix.length, 30);
});

Deno.test("render: --problems leaves out ok findings (table and json), colour only when asked", () => {
  const plain = renderTable(report, { problemsOnly: true });
  assertEquals(plain.includes("ip-forward"), false);
  assertEquals(plain.includes("rp-filter"), true);
  assertEquals(plain.includes("\x1b["), false);
  const j = JSON.parse(renderJson(report, { problemsOnly: true }));
  assertEquals(j.checks.map((c: { id: string }) => c.id), ["mtu", "rp-filter", "vxlan-csum-offload"]);
  assertEquals(j.summary.ok, 1);
  const coloured = renderTable(report, { color: true });
  assertEquals(coloured.includes("\x1b[1;31mCRITICAL\x1b[0m  mtu"), true);
  assertEquals(coloured.includes("\x1b[32mOK      \x1b[0m  ip-forward"), true);
  // Same text once the colour codes are taken out.
  assertEquals(
    coloured.replaceAll(new RegExp(String.fromCharCode(27) + "\\[[0-9;]*m", "g"), ""),
    renderTable(report),
  );
});
