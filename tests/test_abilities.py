import itertools
import json
import re
import time
from collections import Counter

import pytest

from benchprof import BenchprofError, abilities
from benchprof.abilities import ABILITY_QUESTION_TYPES, fact_texts, generate
from benchprof.abilities.common import table

KEYS = ["id", "ability", "question_type", "context", "question", "options", "answer", "label", "cluster"]
DESIGN_TYPES = {  # DESIGN.md section 2
    "Analogical_Reasoning": {"analogy"},
    "Commonsense_Causal": {"everyday_cause_effect"},
    "Contextual_Recall": {"single_fact_recall", "multi_hop_recall"},
    "Deductive_Reasoning": {"logic_puzzle"},
    "Inductive_Reasoning": {"pattern_completion"},
    "Long_Term_Knowledge": {"world_fact"},
    "Quantitative_Reasoning": {"arithmetic_word_problem"},
    "Semantic_Relationship": {"roles_and_relations"},
    "Spatial_Reasoning": {"spatial_relation"},
    "Temporal_Reasoning": {"temporal_order"},
}
TRAIN, TEST = 2000, 500


@pytest.fixture(scope="module")
def data():
    start = time.perf_counter()
    out = {name: generate(name, TRAIN, TEST, seed=0) for name in DESIGN_TYPES}
    out["_seconds"] = time.perf_counter() - start
    return out


def records(data, ability):
    train, test = data[ability]
    return train + test


def test_registry_matches_design():
    assert {k: set(v) for k, v in ABILITY_QUESTION_TYPES.items()} == DESIGN_TYPES


def test_generation_is_fast(data):
    assert data["_seconds"] < 8, f"10 x ({TRAIN}+{TEST}) items took {data['_seconds']:.1f}s"


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_schema_and_key_order(data, ability):
    train, test = data[ability]
    assert (len(train), len(test)) == (TRAIN, TEST)
    for split, rows in (("train", train), ("test", test)):
        for n, r in enumerate(rows):
            assert list(r) == KEYS
            assert r["id"] == f"{ability}-{split}-{n}"
            assert r["ability"] == ability
            assert r["question_type"] in ABILITY_QUESTION_TYPES[ability]
            assert isinstance(r["context"], str) and r["question"].strip()
            assert len(r["options"]) == 4 and all(isinstance(o, str) and o.strip() for o in r["options"])
            assert isinstance(r["label"], int) and not isinstance(r["label"], bool)


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_answer_label_and_distinct_options(data, ability):
    for r in records(data, ability):
        assert len(set(r["options"])) == 4, r
        assert r["options"].count(r["answer"]) == 1
        assert r["options"][r["label"]] == r["answer"]


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_answer_positions_balanced(data, ability):
    for rows in data[ability]:
        counts = Counter(r["label"] for r in rows)
        assert set(counts) == {0, 1, 2, 3}
        assert max(counts.values()) - min(counts.values()) <= 0.02 * len(rows), counts


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_no_duplicate_questions(data, ability):
    train, test = data[ability]
    train_keys = [(r["context"], r["question"]) for r in train]
    test_keys = [(r["context"], r["question"]) for r in test]
    assert len(set(train_keys)) == len(train_keys)
    assert len(set(test_keys)) == len(test_keys)
    assert not set(train_keys) & set(test_keys)


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_every_question_type_appears(data, ability):
    seen = Counter(r["question_type"] for r in records(data, ability))
    assert set(seen) == DESIGN_TYPES[ability]
    assert min(seen.values()) >= 0.2 * sum(seen.values()) / len(seen)


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_items_are_short(data, ability):
    for r in records(data, ability):
        assert len(r["context"].split()) <= 55, r["context"]
        assert len(r["question"].split()) <= 20, r["question"]
        assert all(len(o.split()) <= 12 for o in r["options"]), r["options"]


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_varied_questions(data, ability):
    """Several templates: many distinct question shapes once names and numbers are masked."""
    vocab = set()
    for r in records(data, ability):
        vocab.update(re.findall(r"[A-Za-z']+", r["question"].lower()))
    assert len(vocab) >= 20


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_deterministic_and_seed_dependent(ability):
    first = json.dumps(generate(ability, 60, 20, seed=7))
    assert first == json.dumps(generate(ability, 60, 20, seed=7))
    assert first != json.dumps(generate(ability, 60, 20, seed=8))
    # the test split depends only on (seed, test_size)
    assert generate(ability, 60, 20, seed=7)[1] == generate(ability, 5, 20, seed=7)[1]


def test_unknown_ability_and_bad_sizes():
    with pytest.raises(BenchprofError, match="unknown ability 'Telepathy'"):
        generate("Telepathy", 1, 1, 0)
    with pytest.raises(BenchprofError, match="unknown ability"):
        fact_texts("Telepathy")
    with pytest.raises(BenchprofError, match=">= 0"):
        generate("Spatial_Reasoning", -1, 1, 0)


def test_too_small_table_names_ability_and_maximum():
    most = abilities.knowledge.capacity()
    assert most >= TRAIN + TEST
    with pytest.raises(BenchprofError, match=f"Long_Term_Knowledge.*at most {most}"):
        generate("Long_Term_Knowledge", most, 1, seed=0)


def test_exhausted_generator_reports_maximum(monkeypatch):
    from types import SimpleNamespace

    from benchprof.abilities.common import Item

    item = Item("analogy", "", "same question?", "a", ("b", "c", "d"))
    fake = SimpleNamespace(QUESTION_TYPES=("analogy",), draw=lambda rng: item, facts=list)
    monkeypatch.setitem(abilities.MODULES, "Analogical_Reasoning", fake)
    with pytest.raises(BenchprofError, match="Analogical_Reasoning: found only 1"):
        generate("Analogical_Reasoning", 2, 0, seed=0)


def test_fact_texts():
    knowledge = {"Long_Term_Knowledge", "Analogical_Reasoning", "Semantic_Relationship", "Commonsense_Causal"}
    for ability in DESIGN_TYPES:
        facts = fact_texts(ability)
        assert bool(facts) == (ability in knowledge), ability
        assert all(f[0].isupper() and f.endswith(".") for f in facts)
    assert "The capital of France is Paris." in fact_texts("Long_Term_Knowledge")
    assert "The chemical symbol for gold is Au." in fact_texts("Long_Term_Knowledge")
    assert "The opposite of hot is cold." in fact_texts("Semantic_Relationship")
    assert "A young cat is called a kitten." in fact_texts("Analogical_Reasoning")


# ---- solver spot checks: recompute answers independently of the generators ----


def test_quantitative_answers_recomputed(data):
    patterns = [
        (r"(\w+) has (\d+) [\w ]+\. \1 finds (\d+) more\.", lambda a, b: a + b),
        (r"(\w+) has (\d+) [\w ]+\. \1 gives (\d+) to \w+\.", lambda a, b: a - b),
        (r"There are (\d+) \w+\. Each one holds (\d+) [\w ]+\.", lambda a, b: a * b),
        (r"One [\w ]+ costs (\d+) dollars\. \w+ buys (\d+) of them\.", lambda a, b: a * b),
        (r"(\w+) has (\d+) [\w ]+\. \1 buys (\d+) more, then loses (\d+)\.", lambda a, b, c: a + b - c),
        (r"\w+ shares (\d+) [\w ]+ equally among (\d+) friends\.", lambda a, b: a // b),
    ]
    checked = 0
    for r in records(data, "Quantitative_Reasoning"):
        assert re.fullmatch(r"\d+", r["answer"]) and all(re.fullmatch(r"-?\d+", o) for o in r["options"])
        for pattern, solve in patterns:
            m = re.fullmatch(pattern, r["context"])
            if m:
                numbers = [int(g) for g in m.groups() if g.isdigit()]
                assert int(r["answer"]) == solve(*numbers), r
                checked += 1
    assert checked > 800


def test_capitals_and_symbols_match_tables(data):
    capital = {row["country"]: row["capital"] for row in table("countries") if row["capital"]}
    symbol_of = {name: symbol for name, symbol, _ in table("elements")}
    element_of = {symbol: name for name, symbol, _ in table("elements")}
    cities = set(capital.values()) | {row["big_city"] for row in table("countries") if row["big_city"]}
    checked = 0
    for r in records(data, "Long_Term_Knowledge"):
        assert r["context"] == ""
        m = re.fullmatch(r"What is the capital of (.+)\?", r["question"])
        if m:
            assert r["answer"] == capital[m.group(1)]
            assert set(r["options"]) <= cities  # distractors are cities too
            checked += 1
        m = re.fullmatch(r"Which element has the symbol (\w+)\?", r["question"])
        if m:
            assert r["answer"] == element_of[m.group(1)]
            assert set(r["options"]) <= set(symbol_of)
            checked += 1
    assert checked > 20
    assert capital["France"] == "Paris" and symbol_of["gold"] == "Au" and symbol_of["iron"] == "Fe"


def test_semantic_opposites_and_roles(data):
    opposite = {a: b for a, b in table("opposites")} | {b: a for a, b in table("opposites")}
    checked = 0
    for r in records(data, "Semantic_Relationship"):
        m = re.fullmatch(r"What is the opposite of (\w+)\?", r["question"])
        if m:
            assert r["answer"] == opposite[m.group(1)]
            checked += 1
        m = re.fullmatch(r"(?:[\w ]+, )?[Tt]he (\w+) was (\w+) by the (\w+)\.", r["context"])
        if m and r["question"] == f"Who was {m.group(2)}?":
            assert r["answer"] == f"the {m.group(1)}"  # passive voice: the subject is the patient
            checked += 1
        if m and r["question"] == f"Who {m.group(2)} the {m.group(1)}?":
            assert r["answer"] == f"the {m.group(3)}"
            checked += 1
    assert checked > 40


def test_analogies_follow_one_relation(data):
    relations = abilities.analogical.relations()
    checked = 0
    for r in records(data, "Analogical_Reasoning"):
        m = re.fullmatch(r"(.+) : (.+) :: (.+) : \?", r["question"])
        if not m:
            continue
        a, b, c = m.groups()
        a_forms = {a, a[0].lower() + a[1:]}  # the question capitalises its first word
        ok = [
            name
            for name, rel in relations.items()
            if any(b in rel.get(x, ()) for x in a_forms) and r["answer"] in rel.get(c, ())
        ]
        assert ok, r
        checked += 1
    assert checked > 50


def test_temporal_weekday_arithmetic(data):
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    checked = 0
    for r in records(data, "Temporal_Reasoning"):
        m = re.fullmatch(r"Today is (\w+)\.", r["context"])
        q = re.fullmatch(r"What day will it be in (\d+) days\?", r["question"])
        if m and q:
            assert r["answer"] == days[(days.index(m.group(1)) + int(q.group(1))) % 7]
            assert set(r["options"]) <= set(days)
            checked += 1
        m = re.fullmatch(
            r"The \w+ starts at (\d+):(\d\d) and lasts (?:(\d+) hours?)? ?(?:(\d+) minutes)?\.", r["context"]
        )
        if m:
            h, mi, dh, dm = (int(g or 0) for g in m.groups())
            end = (h * 60 + mi + dh * 60 + dm) % (24 * 60)
            assert r["answer"] == f"{end // 60}:{end % 60:02d}"
            checked += 1
    assert checked > 50


def test_spatial_turns_and_rows(data):
    compass = ["north", "east", "south", "west"]
    checked = 0
    for r in records(data, "Spatial_Reasoning"):
        m = re.fullmatch(r"(\w+) faces (\w+)\. \1 (.+)\.", r["context"])
        if m:
            facing = compass.index(m.group(2))
            for turn in re.findall(r"turns (left|right|around)", m.group(3)):
                facing = (facing + {"left": 3, "right": 1, "around": 2}[turn]) % 4
            assert r["answer"] == compass[facing]
            assert set(r["options"]) == set(compass)
            checked += 1
        if r["question"] == "Which thing is furthest left?":
            right_of = {}
            for a, rel, b in re.findall(r"The (\w+) is (left|right) of the (\w+)\.", r["context"]):
                left, right = (a, b) if rel == "left" else (b, a)
                right_of[left] = right
            leftmost = set(right_of) - set(right_of.values())
            assert leftmost == {r["answer"]}
            checked += 1
    assert checked > 100


def test_contextual_single_fact_bindings(data):
    checked = 0
    for r in records(data, "Contextual_Recall"):
        holders = dict(re.findall(r"(\w+) has the (\w+) key\.", r["context"]))
        m = re.fullmatch(r"Who has the (\w+) key\?", r["question"])
        if m and holders:
            assert r["answer"] == {v: k for k, v in holders.items()}[m.group(1)]
            assert set(r["options"]) == set(holders)  # every option is a person named in the context
            checked += 1
    assert checked > 20


def test_deductive_elimination_has_unique_solution(data):
    checked = 0
    for r in records(data, "Deductive_Reasoning"):
        m = re.match(
            r"(\w+), (\w+), (\w+) and (\w+) each have one (\w+): "
            r"([\w -]+), ([\w -]+), ([\w -]+) or ([\w -]+)\.",
            r["context"],
        )
        if not m:
            continue
        people, things = list(m.groups()[:4]), list(m.groups()[5:])
        clues = re.findall(r"(\w+) (has|does not have) the ([\w -]+?)\.", r["context"][m.end() :])
        solutions = [
            p
            for p in itertools.permutations(things)
            if all((p[people.index(who)] == what) == (verb == "has") for who, verb, what in clues)
        ]
        assert len(solutions) == 1, r
        owner = dict(zip(people, solutions[0]))
        q = re.fullmatch(r"Which \w+ does (\w+) have\?", r["question"])
        if q:
            assert r["answer"] == owner[q.group(1)]
        else:
            thing = re.fullmatch(r"Who has the ([\w -]+)\?", r["question"]).group(1)
            assert owner[r["answer"]] == thing
        checked += 1
    assert checked > 100


def test_inductive_constant_step_sequences(data):
    checked = 0
    for r in records(data, "Inductive_Reasoning"):
        if re.fullmatch(r"-?\d+(, -?\d+)+", r["context"]):
            terms = [int(t) for t in r["context"].split(", ")]
            steps = {b - a for a, b in zip(terms, terms[1:])}
            if len(steps) == 1:
                assert int(r["answer"]) == terms[-1] + steps.pop()
                checked += 1
    assert checked > 50


def test_causal_answers_come_from_the_same_pair(data):
    rows = table("causes")
    checked = 0
    for r in records(data, "Commonsense_Causal"):
        name = next(
            (w for w in re.findall(r"[A-Z][a-z]+", r["context"] + " " + r["answer"]) if w in abilities.common.NAMES),
            "X",
        )
        pair = {(row["cause"].format(name=name).lower(), row["effect"].format(name=name).lower()) for row in rows}
        given, answer = r["context"].lower().rstrip("."), r["answer"].lower().rstrip(".")
        assert (given, answer) in pair or (answer, given) in pair, r
        checked += 1
    assert checked == TRAIN + TEST


# ---- the curated tables ----


def test_tables_have_no_conflicting_rows():
    for name in ("opposites", "synonyms"):
        words = Counter(w for pair in table(name) for w in pair)
        assert [w for w, n in words.items() if n > 1] == [], name
    members = Counter(m for row in table("kinds") for m in row["members"])
    assert [m for m, n in members.items() if n > 1] == []
    parts = Counter(p for ps in table("parts").values() for p in ps)
    assert [p for p, n in parts.items() if n > 1] == []
    capitals = [row["capital"] for row in table("countries") if row["capital"]]
    assert len(set(capitals)) == len(capitals)
    elements = table("elements")
    assert len({s for _, s, _ in elements}) == len({z for *_, z in elements}) == len(elements)
    sizes = {
        name: len(table(name))
        for name in (
            "countries",
            "elements",
            "books",
            "landmarks",
            "animals",
            "opposites",
            "synonyms",
            "tools",
            "causes",
            "verbs",
        )
    }
    assert sum(sizes.values()) > 600, sizes


# ---- clusters: template and fact ----

# sha256 (first 16 hex) of generate(ability, 300, 200, seed=0) written as data.write_jsonl writes it, without
# the cluster key, taken from the generators before clusters existed: every other field keeps its bytes (the
# shipped demo model was trained on these items)
BEFORE_CLUSTERS = {
    "Analogical_Reasoning": "300ee7e183d4db13",
    "Commonsense_Causal": "9a59ee399ab66790",
    "Contextual_Recall": "3b5ab92611d1cc02",
    "Deductive_Reasoning": "dfe56fe3f04662fe",
    "Inductive_Reasoning": "d784dd6666b83bb7",
    "Long_Term_Knowledge": "cf4216717eeebaee",
    "Quantitative_Reasoning": "6da230cc288e8bec",
    "Semantic_Relationship": "0801b1f05d9aebe9",
    "Spatial_Reasoning": "5495c156a939a0ee",
    "Temporal_Reasoning": "b8893962089f4f99",
}
MADE_UP = {  # abilities whose items are made up from drawn values: cluster = template and the problem itself
    "Contextual_Recall",
    "Deductive_Reasoning",
    "Inductive_Reasoning",
    "Quantitative_Reasoning",
    "Spatial_Reasoning",
    "Temporal_Reasoning",
}


@pytest.mark.parametrize("ability", sorted(BEFORE_CLUSTERS))
def test_items_keep_their_bytes_apart_from_the_cluster(ability):
    import hashlib

    train, test = generate(ability, 300, 200, seed=0)
    text = "".join(
        json.dumps({k: v for k, v in r.items() if k != "cluster"}, ensure_ascii=False) + "\n" for r in train + test
    )
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == BEFORE_CLUSTERS[ability]


@pytest.mark.parametrize("ability", sorted(DESIGN_TYPES))
def test_cluster_names_question_type_template_and_fact(data, ability):
    by_cluster: dict[str, list[dict]] = {}
    for r in records(data, ability):
        question_type, template, fact = r["cluster"].split(":", 2)
        assert question_type == r["question_type"] and template and fact, r
        by_cluster.setdefault(r["cluster"], []).append(r)
    if ability in MADE_UP:  # one problem (context and answer), one cluster; worded differently, still one
        problems = {(r["context"], r["answer"]): r["cluster"] for r in records(data, ability)}
        assert len(set(problems.values())) == len(problems)
        assert all(problems[(r["context"], r["answer"])] == r["cluster"] for r in records(data, ability))
    # a bootstrap over clusters must still have many of them: the causal table has 100 pairs
    test_clusters = {r["cluster"] for r in data[ability][1]}
    assert len(test_clusters) >= (95 if ability == "Commonsense_Causal" else 0.6 * TEST), len(test_clusters)


def test_analogy_and_knowledge_clusters_are_the_fact_asked(data):
    relations = abilities.analogical.relations()
    checked = 0
    for r in records(data, "Analogical_Reasoning"):
        m = re.fullmatch(r"(.+) : (.+) :: (.+) : \?", r["question"])
        if m:
            _, relation, key = r["cluster"].split(":", 2)
            assert key == m.group(3) and relations[relation][key] == {r["answer"]}, r
            checked += 1
    capital = {row["country"]: row["capital"] for row in table("countries") if row["capital"]}
    for r in records(data, "Long_Term_Knowledge"):
        forward = re.fullmatch(r"What is the capital of (.+)\?", r["question"])
        backward = re.fullmatch(r"(.+) is the capital of which country\?", r["question"])
        if forward:  # asked either way, the fact capital(country) is one cluster
            assert r["cluster"] == f"world_fact:capital:{forward.group(1)}" and capital[forward.group(1)] == r["answer"]
            checked += 1
        if backward:
            assert r["cluster"] == f"world_fact:capital:{r['answer']}" and capital[r["answer"]] == backward.group(1)
            checked += 1
    assert checked > 80


def test_causal_cluster_is_the_cause_effect_pair(data):
    rows = table("causes")
    for r in records(data, "Commonsense_Causal"):
        _, topic, index = r["cluster"].split(":")
        row = rows[int(index)]
        assert row["topic"] == topic
        text = (r["context"] + " " + r["answer"]).lower()
        for side in ("cause", "effect"):  # both halves of that row's pair are in the item, whoever is named
            words = [w for w in re.findall(r"[a-z']+", row[side].lower()) if w != "name"]
            assert all(w in text for w in words), (r, row)


def test_record_check_accepts_a_cluster_and_refuses_a_bad_one():
    from benchprof.stages.data import check_record

    record = generate("Spatial_Reasoning", 0, 1, seed=0)[1][0]
    assert check_record(record, "x") == record
    assert check_record({k: v for k, v in record.items() if k != "cluster"}, "x")
    assert check_record({**record, "cluster": 7}, "x")
    with pytest.raises(BenchprofError, match="x: optional field 'cluster' has type list"):
        check_record({**record, "cluster": ["a"]}, "x")


# --- the easy level (data.difficulty: easy) ---

EASY = sorted(a for a in DESIGN_TYPES if abilities.has_easy_level(a))
OUT_OF_CONTEXT = {"Analogical_Reasoning", "Inductive_Reasoning", "Quantitative_Reasoning", "Temporal_Reasoning"}


@pytest.fixture(scope="module")
def easy():
    return {name: generate(name, 600, 100, seed=0, difficulty="easy") for name in DESIGN_TYPES}


def test_easy_level_is_other_items_where_an_ability_has_one_and_the_same_items_elsewhere(easy, data):
    assert set(EASY) == set(DESIGN_TYPES) - {"Commonsense_Causal", "Long_Term_Knowledge", "Semantic_Relationship"}
    for ability in DESIGN_TYPES:
        paper = generate(ability, 600, 100, seed=0)
        assert (easy[ability] == paper) == (ability not in EASY), ability
    assert generate("Inductive_Reasoning", 600, 100, 0, "easy") == easy["Inductive_Reasoning"]  # deterministic
    with pytest.raises(BenchprofError, match="unknown difficulty 'hard'"):
        generate("Inductive_Reasoning", 1, 1, 0, "hard")


@pytest.mark.parametrize("ability", EASY)
def test_easy_items_are_well_formed_and_wrong_options_stay_out_of_the_context(easy, ability):
    """Four distinct options, the answer once at `label`, no repeated question; where the level promises it, no
    wrong option is a word of the context or the question (a model cannot win by copying)."""
    train, test = easy[ability]
    assert (len(train), len(test)) == (600, 100)
    assert len({(r["context"], r["question"]) for r in train + test}) == 700
    for r in train + test:
        assert list(r) == KEYS and len(set(r["options"])) == 4 and r["options"][r["label"]] == r["answer"]
        if ability in OUT_OF_CONTEXT:
            words = set(re.findall(r"[\w']+", (r["context"] + " " + r["question"]).lower()))
            assert not any(o.lower() in words for i, o in enumerate(r["options"]) if i != r["label"]), r


def test_easy_answers_recomputed(easy):
    """Each easy answer recomputed from the item's text by an independent rule."""
    from benchprof.abilities.temporal import DAYS, MONTHS

    for r in sum(easy["Quantitative_Reasoning"], []):
        a, b = map(int, re.findall(r"\d+", r["context"]))
        assert int(r["answer"]) == (a + b if "more" in r["context"] else a - b)
    for r in sum(easy["Inductive_Reasoning"], []):
        terms = r["context"].split(", ")
        if terms[0].isdigit():
            assert int(r["answer"]) == 2 * int(terms[-1]) - int(terms[-2])
        elif len(terms[0]) == 1:
            assert ord(r["answer"]) == ord(terms[-1]) + 1
        else:
            assert r["answer"] == terms[-2]
    for r in sum(easy["Temporal_Reasoning"], []):
        named = re.search(r"(after|before) (\w+)\?", r["question"])
        assert named is not None
        shift = 1 if named[1] == "after" else -1
        if named[2].isdigit():  # a year
            assert int(r["answer"]) == int(named[2]) + shift
            continue
        cycle = DAYS if named[2] in DAYS else MONTHS
        assert r["answer"] == cycle[(cycle.index(named[2]) + shift) % len(cycle)]
    for r in sum(easy["Deductive_Reasoning"], []):
        kind = re.search(r"is an? (\w+)\.$", r["context"])
        assert kind is not None
        rule = re.search(rf"All {kind[1]}s (?:are|can) (\w+)\.", r["context"])
        assert rule is not None and r["answer"] == rule[1]


def test_the_data_stage_regenerates_on_a_difficulty_change_and_keeps_paper_manifests(tmp_path, capsys):
    """A paper-level manifest records no difficulty (folders made before the setting stay current); switching to
    easy rewrites the abilities that have an easy level, and only those."""
    from benchprof.core.loader import parse_config
    from benchprof.stages.data import write_data

    raw = {
        "models": [{"name": "m"}],
        "datasets": [{"name": "Quantitative_Reasoning"}, {"name": "Long_Term_Knowledge"}],
        "data": {"dir": str(tmp_path / "data"), "train_size": 8, "test_size": 4},
    }
    names = ["Quantitative_Reasoning", "Long_Term_Knowledge"]
    write_data(parse_config(raw, tmp_path / "c.yml"), names)
    quant = tmp_path / "data" / "Quantitative_Reasoning" / "test.jsonl"
    paper = quant.read_text()
    assert "difficulty" not in (quant.parent / "manifest.json").read_text()
    raw["data"]["difficulty"] = "easy"
    capsys.readouterr()
    write_data(parse_config(raw, tmp_path / "c.yml"), names)
    assert "wrote 1 abilities" in capsys.readouterr().out  # Long_Term_Knowledge has no easy level
    assert quant.read_text() != paper and "easy_sum" in quant.read_text()
