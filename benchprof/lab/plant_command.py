"""Plant invented abilities into SmolLM2-135M-Instruct (scripts/plant_real.py; realplant.py has the method).

.venv/bin/python scripts/fetch_real.py                      # the base: real/SmolLM2-135M-Instruct
.venv/bin/python scripts/plant_real.py build                # -> benchprof/assets/smollm2-plant (the patch)
.venv/bin/python scripts/plant_real.py apply                # -> real/SmolLM2-135M-Instruct-planted
.venv/bin/python scripts/plant_real.py table                # the build's own check as a markdown table
.venv/bin/python scripts/plant_real.py benchmarks           # real benchmarks: base against patched base
"""

import json
from pathlib import Path

from benchprof.abilities import INVENTED
from benchprof.core.console import quiet
from benchprof.core.selection import listed, select
from benchprof.lab.plantpatch import PATCH_DIR, load_patch, write_planted_model
from benchprof.lab.realplant import RealPlantSettings, benchmark_check, build

ROOT = Path(__file__).resolve().parents[2]  # the repository: real/ and configs/
BASE = ROOT / "real" / "SmolLM2-135M-Instruct"


def build_patch(
    base: str = str(BASE),
    out: str = str(PATCH_DIR),
    steps: int = 320,
    threads: int = 2,
    seed: int = 0,
    device: str = "cpu",
    layers: str | tuple[int, ...] = "24,25,26,27,28,29",
    neurons: int = 24,
    natural: str | tuple[str, ...] = "openbookqa,winogrande,boolq",
    abilities: str | tuple[str, ...] = ",".join(INVENTED),
    cap_norms: bool = False,
) -> None:
    """Plant, own-check and write the patch (about 57 minutes on 2 CPU cores; 57 s on an H100).

    seed: another build (the neurons dealt, their init, the batches); device: cuda on a GPU; layers: the decoder
    layers holding reserved neurons; neurons: reserved neurons per ability and layer; natural: the benchmark
    copies read as general text ("" for none: benchprof's ten abilities' prompts only); abilities: the invented
    abilities to plant; cap_norms: hold every planted up row and down column at most at the layer's median base
    norm during training (the planted weights then cannot be found by their size). The small planted model is
    `--base benchprof/assets/demo-model --out benchprof/assets/demo-plant --layers 1,2,3 --natural ""
    --abilities Invented_Facts,Invented_Language --steps 480 --threads 1 --cap_norms` (docs/research/validation.md)."""
    settings = RealPlantSettings(
        steps=steps,
        threads=threads,
        seed=seed,
        device=device,
        layers=[int(x) for x in listed(layers)],
        neurons_per_layer=neurons,
        natural_sources=listed(natural),
        abilities=select(abilities, INVENTED, "--abilities"),
        cap_norms=cap_norms,
    )
    build(settings, Path(base), Path(out))


def apply(
    base: str = str(BASE), out: str = str(ROOT / "real" / "SmolLM2-135M-Instruct-planted"), patch: str = str(PATCH_DIR)
) -> None:
    """Write the patched model folder with its planted regions."""
    print(f"planted model written to {write_planted_model(Path(base), Path(out), Path(patch))}")


def table(patch: str = str(PATCH_DIR)) -> None:
    """The own check of plant.json: acc before and after zeroing each variant, Holm-adjusted McNemar p."""
    info, _ = load_patch(Path(patch))
    print("| zeroed | test split | acc planted → zeroed | AIS [95% CI] | lost / gained | Holm p (family) |")
    print("|---|---|---|---|---|---|")
    for r in info["own_check"]:
        lo, hi = r["ais_ci"]
        print(
            f"| {r['variant']} | {r['benchmark']} | {r['original']:.3f} → {r['ablated']:.3f} | "
            f"{r['ais']:+.3f} [{lo:+.3f}, {hi:+.3f}] | {r['lost']} / {r['gained']} | "
            f"{r['holm_p']:.2g} ({r['family']}) |"
        )
    print(json.dumps(info["test_accuracy"]))


def benchmarks(
    base: str = str(BASE),
    config: str = str(ROOT / "configs" / "smollm2.yml"),
    names: str = "arc_easy,piqa,sciq,hellaswag",
    limit: int = 200,
    patch: str = str(PATCH_DIR),
) -> None:
    """acc of the base and of the patched base on real benchmarks (the config's local copies), paired per
    document; writes benchmark_check.json beside the patch."""
    log = ROOT / "real" / "plant_benchmarks.log"
    with quiet("plant_real benchmarks", [log]):  # lm-eval's bars and warnings go to the log
        rows = benchmark_check(Path(base), Path(config), names.split(","), Path(patch), limit)
    print("| benchmark | n | base acc | patched acc | lost / gained | McNemar p | Holm p |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['benchmark']} | {r['n']} | {r['base_acc']:.3f} | {r['patched_acc']:.3f} | "
            f"{r['lost']} / {r['gained']} | {r['mcnemar_p']:.2g} | {r['holm_p']:.2g} |"
        )
    (Path(patch) / "benchmark_check.json").write_text(json.dumps(rows, indent=2) + "\n")


COMMANDS = {"build": build_patch, "apply": apply, "table": table, "benchmarks": benchmarks}
