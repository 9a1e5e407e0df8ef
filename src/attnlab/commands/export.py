"""``attnlab export RUN_DIR OUT_DIR``: a GPT trained on text as a Hugging Face GPT-2 checkpoint that
``transformers`` loads (``GPT2LMHeadModel.from_pretrained(OUT_DIR)``, ``AutoTokenizer`` likewise)."""

from __future__ import annotations

import click

from attnlab._io import dumps_json
from attnlab.commands._errors import usage_errors


@click.command("export")
@click.argument("run_dir", metavar="RUN_DIR", type=str)
@click.argument("out_dir", metavar="OUT_DIR", type=str)
@click.option("--overwrite", is_flag=True, help="Replace an earlier export in OUT_DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the files and config.json as JSON.")
@click.option("--quiet", is_flag=True, help="Print nothing on success.")
@usage_errors
def export(run_dir: str, out_dir: str, overwrite: bool, as_json: bool, quiet: bool) -> None:
    """Write the text run in RUN_DIR (attnlab train --text) to OUT_DIR as a GPT-2 checkpoint:
    config.json, model.safetensors, tokenizer.json, tokenizer_config.json. Models GPT-2 cannot
    express (RoPE, RMSNorm, GLU, no biases, a window, linear/SSM attention, GQA) are refused."""
    from attnlab.training.text_export import export_text_run

    result = export_text_run(run_dir, out_dir, overwrite=overwrite)
    if as_json:
        click.echo(dumps_json(result, indent=2))
        return
    if quiet:
        return
    c = result["config"]
    click.echo(
        f"GPT-2 checkpoint of {run_dir}: {c['n_layer']} layers, {c['n_head']} heads, width {c['n_embd']}, "
        f"{c['n_positions']} positions, vocabulary {c['vocab_size']}, {c['activation_function']}"
    )
    click.echo(f"{'file':<22}  {'bytes':>12}")
    for name, size in result["files"].items():
        click.echo(f"{name:<22}  {size:>12,}")
    click.echo(f"load with transformers.GPT2LMHeadModel.from_pretrained({out_dir!r})")
