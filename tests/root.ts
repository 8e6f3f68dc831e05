/**
 * The root tier's one gate. A test in tests/ that needs root (it makes namespaces, links, firewall rules, a
 * lab or a daemon, or runs mmdebstrap) is declared with `needsRoot.test` instead of `Deno.test`: as root it
 * is registered unchanged; as any other user it is registered ignored, its name ending in "(needs root)"
 * (which `deno test --quiet`, hiding console output, still shows), and stderr says once per test file why
 * and what to run instead. Under CI (`CI=true`) a non-root run also registers a failing test per file that
 * says so: the suite cannot pass without its root tests. Tests that need neither root nor namespaces live
 * beside the code (lib/, cli/, tools/, deploy/: `deno task test:unit`).
 * @module
 */

/** A test body, as `Deno.test` takes it. */
type TestFn = (t: Deno.TestContext) => void | Promise<void>;

/**
 * Registers tests that need root. A `test` method, like `Deno.test`, so `deno fmt` lays them out alike:
 * `needsRoot.test(name, fn)`, `needsRoot.test({ name, fn, ...options })` or
 * `needsRoot.test({ name, ...options }, fn)`.
 */
export interface RootGate {
  test(def: Deno.TestDefinition): void;
  test(name: string, fn: TestFn): void;
  test(options: Omit<Deno.TestDefinition, "fn">, fn: TestFn): void;
}

/** This test file, relative to the checkout (as `deno test` names it). */
function testFile(): string {
  const root = new URL("..", import.meta.url).href;
  return Deno.mainModule.startsWith(root) ? Deno.mainModule.slice(root.length) : Deno.mainModule;
}

/**
 * The sysctl br_netfilter makes (in every namespace): without it flanneld and flanctl's daemon refuse to start
 * in iptables mode (lib/daemon/preflight.ts), so the root tier's daemons and labs fail.
 */
export const BR_NETFILTER_SYSCTL = "/proc/sys/net/bridge/bridge-nf-call-iptables";

/**
 * The gate for a process running as `uid` with `CI` = `ci`; as root it checks once per test file that
 * `brNetfilter` (default {@link BR_NETFILTER_SYSCTL}) exists, and says so at once when not: a failing test
 * under CI, a warning elsewhere. Exported for the suite's own test (tests/test_env_test.ts); test files use
 * {@link needsRoot}.
 */
export function rootGate(
  uid: number | null,
  ci: string | undefined,
  brNetfilter: string = BR_NETFILTER_SYSCTL,
): RootGate {
  let checked = false;
  const checkHost = () => {
    if (checked) return;
    checked = true;
    try {
      Deno.statSync(brNetfilter);
      return;
    } catch { /* missing: below */ }
    const what = `br_netfilter is not loaded (${brNetfilter} is missing): the daemons of the root tests ` +
      "refuse to start in iptables mode; run 'modprobe br_netfilter' (./install.sh --dev loads it)";
    if (ci === "true") {
      Deno.test(`${testFile()}: br_netfilter`, () => {
        throw new Error(what);
      });
    } else {
      console.error(`warning: ${testFile()}: ${what}`);
    }
  };
  let told = false;
  const tell = () => {
    if (told) return;
    told = true;
    const what = `${testFile()}: not root (uid ${uid}); its tests that need root ` +
      "(namespaces, links, firewall rules, labs, daemons) are skipped";
    if (ci === "true") {
      Deno.test(`${testFile()}: tests that need root`, () => {
        throw new Error(`${what}; under CI they may not be skipped: run the suite as root`);
      });
    } else {
      console.error(`warning: ${what}; run as root for them (deno task test:unit runs the rest)`);
    }
  };
  return {
    test(a: string | Deno.TestDefinition | Omit<Deno.TestDefinition, "fn">, fn?: TestFn) {
      const def = (typeof a === "string" ? { name: a, fn } : fn ? { ...a, fn } : a) as Deno.TestDefinition;
      if (uid === 0) {
        checkHost();
        return Deno.test(def);
      }
      tell();
      Deno.test({ ...def, name: `${def.name} (needs root)`, ignore: true });
    },
  };
}

/** `needsRoot.test`: `Deno.test` for a test that needs root; ignored, with the reason on stderr, when not root. */
export const needsRoot: RootGate = rootGate(Deno.uid(), Deno.env.get("CI"));
