"""The corpus privatization job as an Apache Beam pipeline.

    Read      each input file in one DoFn that numbers its texts:
              ((file index, line number), text)
    Batch     group by (file index, line number // batch_size): batches
              of `batch_size` consecutive lines (fewer at a file's end),
              spread over the workers by the shuffle
    Privatize one CorpusMechanism per worker process, built once
              (`mechanisms.build`) however often the runner calls
              DoFn.setup(); every batch encodes, privatizes (fresh
              os.urandom noise per token) and decodes: ((file index, line
              number), private text)
    Blocks    group by (file index, line number // block_lines), sort by
              line number, check that the block holds exactly its lines,
              write it to .tfdptext-blocks/
    Assemble  join each input with its blocks (CoGroupByKey), check that
              every block is there, concatenate them in order into the
              output file, remove them

So line i of an output is the privatized line i of its input whatever the
runner's order or parallelism; a file of L lines gives L output lines (0
lines: an empty output). After the pipeline, `run` checks each output's
line count, removes the blocks folder and writes manifest.json last
(`tfdptext.corpus.outdir`).

The DaskRunner's dask.distributed client is closed when the job ends
(`_close_client`): Beam leaves it open.

Nothing is emitted from finish_bundle: Beam 2.77's DaskRunner drops
what a DoFn emits there (it collects a bundle's outputs before calling
finish_bundle), which lost the last batch of every bundle when the job
batched with BatchElements; the line checks below caught it.

The same pipeline runs on any Beam runner: pass its options
(`pipeline_args`, e.g. ["--runner=DataflowRunner", "--project=...",
"--temp_location=gs://...", "--setup_file=./setup.py"]); the input and
output paths must then be on a file system the workers reach (gs://...),
and the workers need tfdptext (and, for dchi's default, the encoder
package) installed.
"""

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from tfdptext.corpus import inputs as inputs_lib
from tfdptext.corpus import mechanisms
from tfdptext.corpus import outdir
from tfdptext.errors import TfdptextError

# Lines per block file: bounds the memory one worker needs to sort a block.
BLOCK_LINES = 10000
NAMESPACE = "tfdptext"
# "table_loads": mechanisms built by the workers (their pre-flight build
# serves the workers that share the job's process); "cache_hits" and
# "cache_misses": the per-word tables of the exponential mechanisms.
COUNTERS = ("lines", "tokens", "split_lines", "batches", "table_loads",
            "cache_hits", "cache_misses")


class CorpusJobError(TfdptextError):
    """The job failed on an input or output it was given; the message names
    the file."""


class ReadTexts(beam.DoFn):
    """InputFile -> ((file index, line number), text) for every text."""

    def __init__(self, input_format, feature):
        self.input_format = input_format
        self.feature = feature
        self.lines = Metrics.counter(NAMESPACE, "lines")

    def process(self, source):
        count = 0
        for number, text in inputs_lib.read_texts(
                source.path, self.input_format, self.feature):
            count += 1
            yield (source.index, number), text
        self.lines.inc(count)
        if count != source.lines:
            raise inputs_lib.CorpusInputError(
                f"{source.path} has {count} texts, {source.lines} when it "
                "was checked: the file changed during the job.")


class PrivatizeBatch(beam.DoFn):
    """(batch key, [(key, text)]) -> (key, private text) for each, in one
    CorpusMechanism per worker process (`mechanisms.build`).

    Counters: "table_loads" is 1 for each build this DoFn's setup caused
    (with its time in the "table_load_ms" distribution), "cache_hits" and
    "cache_misses" count the privatizer's table cache over each batch."""

    def __init__(self, config):
        self.config = config
        self.tokens = Metrics.counter(NAMESPACE, "tokens")
        self.split_lines = Metrics.counter(NAMESPACE, "split_lines")
        self.batches = Metrics.counter(NAMESPACE, "batches")
        self.table_loads = Metrics.counter(NAMESPACE, "table_loads")
        self.load_ms = Metrics.distribution(NAMESPACE, "table_load_ms")
        self.cache_hits = Metrics.counter(NAMESPACE, "cache_hits")
        self.cache_misses = Metrics.counter(NAMESPACE, "cache_misses")
        self.mechanism = None
        self._loaded = False

    def setup(self):
        before = mechanisms.builds()
        self.mechanism = mechanisms.build(self.config)
        # Reported by the first batch (counters count inside bundles).
        self._loaded = mechanisms.builds() > before

    def process(self, keyed_batch):
        _, batch = keyed_batch
        batch = list(batch)
        if self._loaded:
            self._loaded = False
            self.table_loads.inc()
            self.load_ms.update(int(1000 * self.mechanism.load_seconds))
        cache = getattr(self.mechanism.privatizer, "cache_info", None)
        before = cache() if cache else None
        counts = {}
        private = self.mechanism.privatize_texts(
            [text for _, text in batch], self.config.max_tokens,
            self.config.batch_size, counts)
        self.tokens.inc(counts.get("tokens", 0))
        self.split_lines.inc(counts.get("split_lines", 0))
        self.batches.inc()
        if cache:
            after = cache()
            self.cache_hits.inc(after["hits"] - before["hits"])
            self.cache_misses.inc(after["misses"] - before["misses"])
        for (key, _), text in zip(batch, private):
            yield key, text


class WriteBlock(beam.DoFn):
    """((file index, block), [(line number, text)]) -> (file index, (block,
    path)), after checking that the block holds exactly its lines."""

    def __init__(self, output_dir, line_counts, block_lines):
        self.output_dir = output_dir
        self.line_counts = line_counts
        self.block_lines = block_lines

    def process(self, element):
        (index, block), numbered = element
        numbered = sorted(numbered)
        first = block * self.block_lines
        last = min(first + self.block_lines, self.line_counts[index])
        if [n for n, _ in numbered] != list(range(first, last)):
            raise CorpusJobError(
                f"input {index}: block {block} holds lines "
                f"{[n for n, _ in numbered][:5]}..., not {first}..{last - 1} "
                "(lines lost or repeated in the pipeline).")
        path = outdir.write_block(self.output_dir, index, block,
                                  [text for _, text in numbered])
        yield index, (block, path)


class AssembleOutput(beam.DoFn):
    """(file index, {"source": [InputFile], "blocks": [(block, path)]}) ->
    the output file's name, its blocks concatenated in order."""

    def __init__(self, output_dir, block_lines):
        self.output_dir = output_dir
        self.block_lines = block_lines

    def process(self, element):
        _, grouped = element
        [source] = grouped["source"]
        blocks = sorted(grouped["blocks"])
        expected = -(-source.lines // self.block_lines)
        if [b for b, _ in blocks] != list(range(expected)):
            raise CorpusJobError(
                f"{source.path}: {len(blocks)} blocks of privatized lines, "
                f"expected {expected}.")
        outdir.assemble(self.output_dir, source.output,
                        [path for _, path in blocks])
        yield source.output


def build_pipeline(pipeline, config, input_files, output_dir, *,
                   block_lines=BLOCK_LINES):
    """Adds the job's transforms to `pipeline`; returns the PCollection of
    the output names written."""
    line_counts = {f.index: f.lines for f in input_files}
    files = pipeline | "Inputs" >> beam.Create(list(input_files))
    private = (
        files
        | "ReadTexts" >> beam.ParDo(ReadTexts(config.input_format,
                                              config.tfrecord_feature))
        | "ByBatch" >> beam.Map(_by_batch, config.batch_size)
        | "Batch" >> beam.GroupByKey()
        | "Privatize" >> beam.ParDo(PrivatizeBatch(config)))
    blocks = (
        private
        | "ByBlock" >> beam.Map(_by_block, block_lines)
        | "GroupBlocks" >> beam.GroupByKey()
        | "WriteBlocks" >> beam.ParDo(WriteBlock(output_dir, line_counts,
                                                 block_lines)))
    sources = files | "KeyInputs" >> beam.Map(_by_index)
    return (
        {"source": sources, "blocks": blocks}
        | "JoinBlocks" >> beam.CoGroupByKey()
        | "Assemble" >> beam.ParDo(AssembleOutput(output_dir, block_lines)))


def _by_index(source):
    return source.index, source


def _by_batch(element, batch_size):
    (index, number), _ = element
    return (index, number // batch_size), element


def _by_block(element, block_lines):
    (index, number), text = element
    return (index, number // block_lines), (number, text)


def prepare(config, output_dir):
    """Every check before the job: the config, an empty output directory,
    every input file read through; returns the InputFiles."""
    config.validate()
    outdir.check_empty(output_dir)
    return inputs_lib.check_inputs(config)


def run(config, output_dir, *, pipeline_args=(), command=None,
        input_files=None, block_lines=BLOCK_LINES):
    """Runs the job and writes manifest.json last; returns the manifest.

    Args:
        config: a CorpusConfig.
        output_dir: a new or empty directory.
        pipeline_args: Beam pipeline options (default: the DirectRunner).
        command: the command line, for the manifest.
        input_files: InputFiles from `prepare` (default: prepare now).
        block_lines: lines per block file.

    Raises TfdptextError (naming the flag or file) for a bad config, input
    or output directory, before any work when it can be seen then, else
    when the pipeline meets it; a failed job leaves no manifest.
    """
    if input_files is None:
        input_files = prepare(config, output_dir)
    mechanism = mechanisms.build(config)  # fails here, not in a worker
    pipeline = beam.Pipeline(options=PipelineOptions(list(pipeline_args)))
    build_pipeline(pipeline, config, input_files, output_dir,
                   block_lines=block_lines)
    result = _run_pipeline(pipeline, output_dir)
    outputs = outdir.check_outputs(output_dir, input_files)
    outdir.remove_blocks(output_dir)
    manifest = outdir.make_manifest(
        config=config, mechanism=mechanism, input_files=input_files,
        outputs=outputs, command=command, pipeline_args=pipeline_args,
        statistics=_statistics(result))
    outdir.write_manifest(output_dir, manifest)
    return manifest


def _run_pipeline(pipeline, output_dir):
    """Runs `pipeline` to the end; an input or output error met inside it
    becomes a CorpusJobError naming the file (a runner that reports remote
    failures as text is searched for the error's message)."""
    result = None
    try:
        result = pipeline.run()
        result.wait_until_finish()
        return result
    except Exception as err:  # Runners wrap worker errors in many types.
        message = _project_error_message(err)
        if message is None:
            raise
        raise CorpusJobError(
            f"{message}; {output_dir} holds no {outdir.MANIFEST} (the "
            "output is incomplete): remove it before running again."
        ) from None
    finally:
        _close_client(result)


def _close_client(result):
    """Closes the dask.distributed client that Beam's DaskRunner opens for
    the job and leaves open in its result: left open, it outlives the job
    in this process and, once the cluster is gone, retries the scheduler
    for 30 s and prints "Failed to reconnect to scheduler"."""
    client = getattr(result, "client", None)
    if client is not None:
        client.close()


def _project_error_message(err):
    """The message of the TfdptextError behind `err`, or None."""
    if isinstance(err, TfdptextError):
        text = str(err)
    else:
        text = str(err)
        names = [cls.__name__ for cls in _error_classes()]
        found = [line for line in text.splitlines()
                 if any(f"{name}: " in line for name in names)]
        if not found:
            return None
        text = found[-1].split(": ", 1)[1]
    return text.split(" [while running", 1)[0].strip()


def _error_classes():
    return (inputs_lib.CorpusInputError, outdir.OutputDirError,
            CorpusJobError, mechanisms.MechanismUnavailableError)


def _statistics(result):
    """The job's counters (`COUNTERS`) and the longest table load in a
    worker ("table_load_ms_max"), where the runner reports them."""
    try:
        found = result.metrics().query(
            MetricsFilter().with_namespace(NAMESPACE))
    except Exception:  # Not every runner reports metrics.
        return {}
    totals = {}
    for counter in found["counters"]:
        name = counter.key.metric.name
        if name in COUNTERS:
            totals[name] = totals.get(name, 0) + int(counter.committed or 0)
    for distribution in found.get("distributions", []):
        value = distribution.committed
        if distribution.key.metric.name == "table_load_ms" and value and \
                value.count:
            totals["table_load_ms_max"] = max(
                totals.get("table_load_ms_max", 0), int(value.max))
    return totals
