import { assertEquals } from "../../tests/assert.ts";
import { findDaemonProcess, isDaemonArgv } from "./daemon_process.ts";

Deno.test("isDaemonArgv: every way a daemon is started, and no argument that merely names one", () => {
  const yes = [
    ["/opt/bin/flanneld", "--ip-masq", "--kube-subnet-mgr"], // flannel's, or the compiled flanctl so named
    ["flanneld"],
    ["/usr/local/bin/flanctl", "daemon", "--iface", "eth0"], // compiled
    ["./dist/flanctl", "daemon"],
    // A checkout outside any flanctl directory: `reset` saw it (main.ts), `doctor` did not (no "flanctl").
    ["/usr/bin/deno", "run", "-A", "--no-check", "main.ts", "daemon", "--store-dir", "/tmp/s"],
    ["deno", "run", "-A", "--no-check", "--config", "/work/main/deno.json", "/work/main/main.ts", "daemon"],
    // install.sh's launcher and the image run the bundle without a `daemon` verb: neither copy saw it.
    [
      "/usr/local/lib/flanctl/deno",
      "run",
      "-A",
      "--v8-flags=--jitless,--max-old-space-size=64",
      "/usr/local/lib/flanctl/daemon.js",
      "--kube-subnet-mgr",
    ],
    ["/usr/bin/deno", "run", "-A", "/tmp/x/daemon.js", "--iface", "eth0"],
    ["deno", "run", "-A", "cli/daemon_entry.ts"],
  ];
  const no = [
    // Both copies took these for daemons: an argument named flanneld, or "flanctl" and "daemon" anywhere.
    ["tail", "-f", "/var/log/flanneld"],
    ["/usr/local/bin/flanctl", "doctor", "--netns", "daemon"],
    ["sudo", "/usr/local/bin/flanctl", "daemon"], // sudo's own process: its child is the daemon
    ["vim", "/etc/flanctl/daemon"],
    ["deno", "run", "-A", "main.ts", "doctor", "daemon"],
    ["deno", "task", "flanctl", "daemon"], // deno task's process: the `deno run` it starts is the daemon
    ["deno", "run", "-A", "--config", "daemon.json", "other.ts", "daemon"],
    ["/usr/bin/node", "daemon.js"],
    ["/usr/local/bin/flanctl", "status"],
    [],
  ];
  for (const a of yes) assertEquals(isDaemonArgv(a), true, a.join(" "));
  for (const a of no) assertEquals(isDaemonArgv(a), false, a.join(" "));
});

/** A fake /proc in a temp dir: `pid` → its argv and the namespace file its ns/net points to. */
function fakeProc(procs: Record<number, { argv: string[] | null; ns: string }>): { dir: string; ns: string } {
  const dir = Deno.makeTempDirSync({ prefix: "flanctl-proc-" });
  const ns = `${dir}/ns`;
  Deno.mkdirSync(ns);
  for (const n of ["a", "b"]) Deno.writeTextFileSync(`${ns}/${n}`, n);
  for (const [pid, p] of Object.entries(procs)) {
    Deno.mkdirSync(`${dir}/proc/${pid}/ns`, { recursive: true });
    if (p.argv) Deno.writeTextFileSync(`${dir}/proc/${pid}/cmdline`, p.argv.map((a) => `${a}\0`).join(""));
    Deno.symlinkSync(`${ns}/${p.ns}`, `${dir}/proc/${pid}/ns/net`);
  }
  Deno.mkdirSync(`${dir}/proc/self`, { recursive: true });
  return { dir, ns };
}

Deno.test("findDaemonProcess: the first daemon by pid in the asked namespace, never this process", () => {
  const { dir, ns } = fakeProc({
    30: { argv: ["/opt/bin/flanneld", "--iface", "eth0"], ns: "b" }, // another namespace
    40: { argv: ["tail", "-f", "/var/log/flanneld"], ns: "a" },
    50: { argv: ["deno", "run", "-A", "/work/main/main.ts", "daemon"], ns: "a" },
    60: { argv: ["/usr/local/bin/flanctl", "daemon"], ns: "a" },
    70: { argv: null, ns: "a" }, // cmdline unreadable (gone)
    900: { argv: ["/usr/local/bin/flanctl", "daemon"], ns: "a" },
  });
  try {
    const proc = `${dir}/proc`;
    assertEquals(findDaemonProcess(`${ns}/a`, proc, 1), {
      pid: 50,
      cmd: "deno run -A /work/main/main.ts daemon",
    });
    assertEquals(findDaemonProcess(`${ns}/a`, proc, 50)?.pid, 60, "this process is never the daemon");
    assertEquals(findDaemonProcess(`${ns}/b`, proc, 1)?.pid, 30);
    assertEquals(findDaemonProcess(`${dir}/no-such-netns`, proc, 1), null, "an unreadable namespace");
    assertEquals(findDaemonProcess(`${ns}/a`, `${dir}/no-proc`, 1), null);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("findDaemonProcess: a hostile command line is shown escaped and cut", () => {
  const argv = ["/opt/bin/flanneld", "--x=\x1b[2J", "y".repeat(300)];
  const { dir, ns } = fakeProc({
    7: { argv, ns: "a" },
    8: { argv: ["/usr/local/bin/flanctl", "", "daemon"], ns: "a" }, // an empty first argument: not `daemon`
  });
  try {
    const p = findDaemonProcess(`${ns}/a`, `${dir}/proc`, 1)!;
    assertEquals(p.pid, 7);
    assertEquals(p.cmd.startsWith("/opt/bin/flanneld --x=\\x1b[2J yyy"), true, p.cmd);
    assertEquals(p.cmd.includes("\x1b"), false);
    const tail = `… (${argv.join(" ").length} chars)`;
    assertEquals(p.cmd.endsWith(tail), true, p.cmd);
    assertEquals(p.cmd.length - tail.length, 120);
    assertEquals(findDaemonProcess(`${ns}/a`, `${dir}/proc`, 7), null);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
