"""The scorer registry: names and aliases to scorer classes.

Built-in scorers are listed here by module path and imported only when first resolved, so that
importing the plugin stays cheap (no scipy, no openai, no torch until a scorer needs them).
Lookup is forgiving about spelling: ``"ClosedQA"``, ``"closed_qa"`` and ``"closedqa"`` all resolve.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Iterable
from typing import Any, final

from pytest_llmeval.core.errors import UnknownScorerError
from pytest_llmeval.engine.scoring import Scorer

__all__ = [
    "BUILTIN_SCORERS",
    "ScorerRegistry",
    "default_registry",
    "normalize_name",
    "resolve_scorer",
]

#: name -> (module, class, reference spellings). The module path is relative to
#: ``pytest_llmeval.scorers``.
BUILTIN_SCORERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # deterministic (lexical.py, structured.py, text.py)
    "exact_match": ("lexical", "ExactMatch", ("ExactMatch",)),
    "levenshtein": ("lexical", "Levenshtein", ("Levenshtein", "LevenshteinScorer")),
    "numeric_diff": ("lexical", "NumericDiff", ("NumericDiff",)),
    "word_count_match": ("text", "WordCountMatch", ("WordCountMatch",)),
    "readability": ("text", "Readability", ("Readability",)),
    "specificity": ("text", "Specificity", ("Specificity",)),
    "json_diff": ("structured", "JSONDiff", ("JSONDiff",)),
    "valid_json": ("structured", "ValidJSON", ("ValidJSON",)),
    "list_contains": ("structured", "ListContains", ("ListContains",)),
    # embeddings (embedding.py, bertscore.py)
    "embedding_similarity": ("embedding", "EmbeddingSimilarity", ("EmbeddingSimilarity",)),
    "answer_similarity": ("embedding", "AnswerSimilarity", ("AnswerSimilarity",)),
    "bertscore": ("bertscore", "BERTScore", ("BERTScore", "bert_score")),
    "hedging_language": ("bertscore", "HedgingLanguage", ("HedgingLanguage",)),
    # LLM judges: Autoevals classifiers (llm.py)
    "factuality": ("llm", "Factuality", ("Factuality",)),
    "battle": ("llm", "Battle", ("Battle",)),
    "closed_qa": ("llm", "ClosedQA", ("ClosedQA",)),
    "humor": ("llm", "Humor", ("Humor",)),
    "security": ("llm", "Security", ("Security",)),
    "sql": ("llm", "Sql", ("Sql", "SQL")),
    "summary": ("llm", "Summary", ("Summary",)),
    "translation": ("llm", "Translation", ("Translation",)),
    "possible": ("llm", "Possible", ("Possible",)),
    # Bench judges (bench_judges.py)
    "qa_correctness": ("bench_judges", "QACorrectness", ("QACorrectness", "qa_correctness")),
    "summary_quality": ("bench_judges", "SummaryQuality", ("SummaryQuality",)),
    "hallucination": ("bench_judges", "Hallucination", ("Hallucination",)),
    # others
    "moderation": ("moderation", "Moderation", ("Moderation",)),
    "l3score": ("l3score", "L3Score", ("L3Score",)),
    "g_eval": ("custom", "GEval", ("GEval",)),
    # RAG (rag.py)
    "context_entity_recall": ("rag", "ContextEntityRecall", ("ContextEntityRecall",)),
    "context_relevancy": ("rag", "ContextRelevancy", ("ContextRelevancy",)),
    "context_recall": ("rag", "ContextRecall", ("ContextRecall",)),
    "context_precision": ("rag", "ContextPrecision", ("ContextPrecision",)),
    "faithfulness": ("rag", "Faithfulness", ("Faithfulness",)),
    "answer_relevancy": ("rag", "AnswerRelevancy", ("AnswerRelevancy",)),
    "answer_correctness": ("rag", "AnswerCorrectness", ("AnswerCorrectness",)),
    # code (code.py)
    "python_unit_testing": ("code", "PythonUnitTesting", ("PythonUnitTesting",)),
    # agents and tool calls (agents.py)
    "tool_correctness": ("agents", "ToolCorrectness", ("ToolCorrectness", "ToolCorrectnessMetric")),
    "tool_call_accuracy": ("agents", "ToolCallAccuracy", ("ToolCallAccuracy",)),
    "task_completion": ("agents", "TaskCompletion", ("TaskCompletion", "TaskCompletionMetric")),
    "trajectory_match": ("trajectory", "TrajectoryMatch", ("TrajectoryMatch",)),
    "trace_budget": ("trajectory", "TraceBudget", ("TraceBudget",)),
    "trace_usage": ("trajectory", "TraceUsage", ("TraceUsage",)),
    "argument_correctness": (
        "agents",
        "ArgumentCorrectness",
        ("ArgumentCorrectness", "ArgumentCorrectnessMetric"),
    ),
    # conversations (conversation.py)
    "conversation_relevancy": (
        "conversation",
        "ConversationRelevancy",
        ("ConversationRelevancy", "ConversationRelevancyMetric"),
    ),
    "knowledge_retention": (
        "conversation",
        "KnowledgeRetention",
        ("KnowledgeRetention", "KnowledgeRetentionMetric"),
    ),
    "role_adherence": ("conversation", "RoleAdherence", ("RoleAdherence", "RoleAdherenceMetric")),
    "conversation_completeness": (
        "conversation",
        "ConversationCompleteness",
        ("ConversationCompleteness", "ConversationCompletenessMetric"),
    ),
}


def normalize_name(name: str) -> str:
    """The spelling-insensitive form of a scorer name: lower case, no ``_``, ``-`` or spaces."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


@final
class ScorerRegistry:
    """Maps scorer names (and aliases) to :class:`Scorer` subclasses."""

    def __init__(self, builtins: dict[str, tuple[str, str, tuple[str, ...]]] | None = None) -> None:
        self._lock = threading.RLock()
        self._classes: dict[str, type[Scorer]] = {}
        self._lazy: dict[str, tuple[str, str]] = {}
        # normalized spelling -> canonical name
        self._index: dict[str, str] = {}
        # exact spelling -> class, filled by get(); cleared by register()
        self._resolved: dict[str, type[Scorer]] = {}
        #: what callers derive from names (score()'s plans), cleared by register() as a name
        #: may then mean another class
        self.memo: dict[Any, Any] = {}
        for name, (module, cls, aliases) in (builtins or {}).items():
            self._lazy[name] = (module, cls)
            self._add_names(name, aliases)

    def _add_names(self, name: str, aliases: Iterable[str]) -> None:
        for spelling in (name, *aliases):
            self._index[normalize_name(spelling)] = name

    def register(self, cls: type[Scorer], *, replace: bool = False) -> type[Scorer]:
        """Register a scorer class under ``cls.name`` and ``cls.aliases``.

        Registering a second class under a taken name raises ``ValueError`` unless ``replace``.
        """
        if not (isinstance(cls, type) and issubclass(cls, Scorer)):
            raise TypeError(f"register() takes a Scorer subclass, not {cls!r}")
        if not cls.name:
            raise ValueError(f"{cls.__name__} has no `name`; set the class attribute")
        with self._lock:
            taken = self._index.get(normalize_name(cls.name))
            if taken is not None and not replace:
                existing = self._classes.get(taken)
                if existing is not cls:
                    raise ValueError(
                        f"a scorer named {cls.name!r} is already registered ({taken!r}); "
                        "pass replace=True to override it"
                    )
            self._classes[cls.name] = cls
            self._lazy.pop(cls.name, None)
            self._resolved.clear()
            self._add_names(cls.name, cls.aliases)
            self.memo.clear()
        return cls

    def canonical(self, name: str) -> str:
        """The registered name for ``name`` or any of its spellings; raises UnknownScorerError."""
        with self._lock:
            found = self._index.get(normalize_name(name))
            if found is None:
                spellings = sorted(set(self._classes) | set(self._lazy))
                close = difflib.get_close_matches(name, spellings, n=3, cutoff=0.5)
                if not close:
                    norm = {normalize_name(s): s for s in spellings}
                    close = [
                        norm[c]
                        for c in difflib.get_close_matches(
                            normalize_name(name), list(norm), n=3, cutoff=0.5
                        )
                    ]
                raise UnknownScorerError(name, close)
            return found

    def get(self, name: str) -> type[Scorer]:
        """The scorer class registered under ``name`` (any spelling), importing it if built in."""
        hit = self._resolved.get(name)
        if hit is not None:
            return hit
        cls = self._get(name)
        self._resolved[name] = cls
        return cls

    def _get(self, name: str) -> type[Scorer]:
        canonical = self.canonical(name)
        with self._lock:
            cls = self._classes.get(canonical)
            if cls is not None:
                return cls
            module, clsname = self._lazy[canonical]
        mod = importlib.import_module(f"pytest_llmeval.scorers.{module}")
        cls = getattr(mod, clsname)
        if not (isinstance(cls, type) and issubclass(cls, Scorer)):
            raise TypeError(f"built-in scorer {canonical!r} is not a Scorer subclass")
        with self._lock:
            self._classes[canonical] = cls
        return cls

    def names(self) -> list[str]:
        with self._lock:
            return sorted(set(self._classes) | set(self._lazy))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_name(name) in self._index


default_registry = ScorerRegistry(BUILTIN_SCORERS)


def resolve_scorer(
    value: Any,
    *,
    owner: str,
    option: str,
    registry: ScorerRegistry | None = None,
) -> Scorer:
    """A scorer instance from an option value (the one way a scorer option names another
    scorer): a registered name (any spelling), a :class:`Scorer` subclass (instantiated with its
    defaults) or an instance (as is). Anything else, or an unknown name, is a
    :class:`~pytest_llmeval.core.errors.ScorerConfigError` naming ``owner`` and ``option``."""
    from pytest_llmeval.core.errors import ScorerConfigError, describe_value

    if isinstance(value, Scorer):
        return value
    if isinstance(value, type) and issubclass(value, Scorer):
        return value()
    if isinstance(value, str):
        try:
            return (registry or default_registry).get(value)()
        except UnknownScorerError as exc:
            raise ScorerConfigError(owner, option, str(exc)) from None
    raise ScorerConfigError(
        owner,
        option,
        f"must be a registered scorer name, a Scorer class or a Scorer instance, not "
        f"{describe_value(value)}",
    )
