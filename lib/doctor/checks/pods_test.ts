import { assertEquals } from "../../../tests/assert.ts";
import { releaseLeakedCommand } from "./pods.ts";

Deno.test("hostlocal-ips: the release command spares files newer than the run, to the millisecond", async () => {
  const dir = await Deno.makeTempDir({ prefix: "flanctl-leak-" });
  try {
    const at = Date.now();
    const files: Array<[string, string, number]> = [
      ["10.244.1.2", "live\neth0", at - 5_000], // the live pod's, old
      ["10.244.1.3", "gone\r\neth0", at - 5_000], // leaked long ago
      ["10.244.1.4", "gone2\neth0", at - 300], // leaked in the second doctor ran
      ["10.244.1.5", "new\neth0", at + 300], // a pod made after doctor looked
      ["fd00::5", "gone3\neth0", at - 300],
      ["last_reserved_ip.0", "10.244.1.5", at - 5_000],
      ["lock", "", at - 5_000],
    ];
    for (const [name, body, mtime] of files) {
      await Deno.writeTextFile(`${dir}/${name}`, body);
      await Deno.utime(`${dir}/${name}`, mtime / 1000, mtime / 1000);
    }
    const cmd = new Deno.Command("sh", { args: ["-c", releaseLeakedCommand(dir, ["live"], at)] });
    const out = await cmd.output();
    assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
    const left = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assertEquals(left, ["10.244.1.2", "10.244.1.5", "last_reserved_ip.0", "lock"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
