"""The Qdrant Edge side of the differential suite (package edgediff).

Reads one JSON request a line on stdin, or a JSON array of requests, and writes its answer,
or the array of their answers in order, as one line on stdout. Each
collection is an EdgeShard in a temporary directory; the requests are the gRPC calls the
emulator received, in a plain JSON form (mirror.go). Answers hold ids, counts, payloads,
vectors and scores as the engine returned them; any exception is answered as an error.
The first line written is a greeting naming the qdrant-edge-py version.
"""

import importlib.metadata
import json
import shutil
import sys
import tempfile
import traceback
import uuid

import qdrant_edge as q

DISTANCES = {
    "cosine": q.Distance.Cosine,
    "dot": q.Distance.Dot,
    "euclid": q.Distance.Euclid,
    "manhattan": q.Distance.Manhattan,
}

SCHEMAS = {
    "keyword": q.PayloadSchemaType.Keyword,
    "integer": q.PayloadSchemaType.Integer,
    "float": q.PayloadSchemaType.Float,
    "bool": q.PayloadSchemaType.Bool,
    "uuid": q.PayloadSchemaType.Uuid,
    "text": q.PayloadSchemaType.Text,
    "datetime": q.PayloadSchemaType.Datetime,
    "geo": q.PayloadSchemaType.Geo,
}

TOKENIZERS = {
    "word": q.TokenizerType.Word,
    "whitespace": q.TokenizerType.Whitespace,
    "prefix": q.TokenizerType.Prefix,
    "multilingual": q.TokenizerType.Multilingual,
}


def point_id(x):
    """A point id of the JSON form: an integer or a UUID string."""
    return x if isinstance(x, int) else str(x)


def id_out(x):
    return x if isinstance(x, int) else str(uuid.UUID(str(x)))


def conditions(cs):
    # The gRPC API reads an empty clause as no clause (conditions_helper_from_grpc).
    if not cs:
        return None
    return [condition(c) for c in cs]


def filter_of(f):
    if f is None:
        return None
    ms = f.get("min_should")
    return q.Filter(
        must=conditions(f.get("must")),
        should=conditions(f.get("should")),
        must_not=conditions(f.get("must_not")),
        min_should=None
        if ms is None
        else q.MinShould([condition(c) for c in ms.get("conditions") or []], ms["min_count"]),
    )


def match_of(m):
    (kind, v), = m.items()
    if kind in ("keyword", "integer", "boolean"):
        return q.MatchValue(v)
    if kind in ("keywords", "integers"):
        return q.MatchAny(v)
    if kind in ("except_keywords", "except_integers"):
        return q.MatchExcept(v)
    if kind == "text":
        return q.MatchText(v)
    if kind == "text_any":
        return q.MatchTextAny(v)
    if kind == "phrase":
        return q.MatchPhrase(v)
    raise ValueError("unknown match " + kind)


def condition(c):
    (kind, v), = c.items()
    if kind == "field":
        r = v.get("range")
        vc = v.get("values_count")
        return q.FieldCondition(
            key=v["key"],
            match=match_of(v["match"]) if "match" in v else None,
            range=q.RangeFloat(**r) if r is not None else None,
            values_count=q.ValuesCount(**vc) if vc is not None else None,
            is_empty=v.get("is_empty"),
            is_null=v.get("is_null"),
        )
    if kind == "is_empty":
        return q.IsEmptyCondition(v)
    if kind == "is_null":
        return q.IsNullCondition(v)
    if kind == "has_id":
        return q.HasIdCondition({point_id(x) for x in v})
    if kind == "filter":
        return filter_of(v)
    if kind == "nested":
        return q.NestedCondition(v["key"], filter_of(v["filter"]))
    if kind == "has_vector":
        return q.HasVectorCondition(v)
    raise ValueError("unknown condition " + kind)


def vectors_out(v):
    if v is None:
        return None
    if isinstance(v, dict):
        return {k: list(x) for k, x in v.items()}
    return {"": list(v)}


def payload_selector(p):
    if p is None:
        return True
    if isinstance(p, dict):
        return q.PayloadSelector.Exclude(p["exclude"])
    return p


class Oracle:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="edgediff-")
        self.shards = {}
        self.n = 0

    def shard(self, name):
        s = self.shards.get(name)
        if s is None:
            raise KeyError("Collection `%s` doesn't exist!" % name)
        return s

    def drop(self, name):
        s = self.shards.pop(name, None)
        if s is None:
            return False
        s[0].close()
        shutil.rmtree(s[1], ignore_errors=True)
        return True

    def op_create(self, r):
        self.drop(r["collection"])
        self.n += 1
        path = "%s/%d" % (self.root, self.n)
        vs = {name: q.EdgeVectorParams(size=p["size"], distance=DISTANCES[p["distance"]]) for name, p in r["vectors"].items()}
        cfg = q.EdgeConfig(vectors=vs[""] if list(vs) == [""] else vs)
        self.shards[r["collection"]] = (q.EdgeShard.create(path, cfg), path)
        return {}

    def op_drop(self, r):
        return {"existed": self.drop(r["collection"])}

    def op_upsert(self, r):
        pts = []
        for p in r["points"]:
            v = p["vector"]
            pts.append(q.Point(point_id(p["id"]), v[""] if list(v) == [""] else v, p.get("payload") or {}))
        self.shard(r["collection"])[0].update(q.UpdateOperation.upsert_points(pts))
        return {}

    def op_delete(self, r):
        s = self.shard(r["collection"])[0]
        if "ids" in r:
            s.update(q.UpdateOperation.delete_points([point_id(x) for x in r["ids"]]))
        else:
            s.update(q.UpdateOperation.delete_points_by_filter(filter_of(r["filter"])))
        return {}

    def op_set_payload(self, r):
        s = self.shard(r["collection"])[0]
        key = r.get("key")
        if "ids" in r:
            s.update(q.UpdateOperation.set_payload([point_id(x) for x in r["ids"]], r["payload"], key))
        else:
            s.update(q.UpdateOperation.set_payload_by_filter(filter_of(r["filter"]), r["payload"], key))
        return {}

    def op_index(self, r):
        t = r["type"]
        p = r.get("params") or {}
        if t == "text" and p:
            schema = q.TextIndexParams(
                tokenizer=TOKENIZERS[p["tokenizer"]] if p.get("tokenizer") else None,
                lowercase=p.get("lowercase"),
                phrase_matching=p.get("phrase_matching"),
            )
        elif t == "integer" and p:
            schema = q.IntegerIndexParams(lookup=p.get("lookup"), range=p.get("range"))
        else:
            schema = SCHEMAS[t]
        self.shard(r["collection"])[0].update(q.UpdateOperation.create_field_index(r["field"], schema))
        return {}

    def op_count(self, r):
        n = self.shard(r["collection"])[0].count(q.CountRequest(exact=True, filter=filter_of(r.get("filter"))))
        return {"count": n}

    def op_scroll(self, r):
        off = r.get("offset")
        recs, nxt = self.shard(r["collection"])[0].scroll(
            q.ScrollRequest(
                offset=None if off is None else point_id(off),
                limit=r.get("limit"),
                filter=filter_of(r.get("filter")),
                with_payload=payload_selector(r.get("with_payload")),
                with_vector=bool(r.get("with_vector")),
            )
        )
        return {"points": [record(x) for x in recs], "next": None if nxt is None else id_out(nxt)}

    def op_get(self, r):
        recs = self.shard(r["collection"])[0].retrieve(
            [point_id(x) for x in r["ids"]],
            with_payload=payload_selector(r.get("with_payload")),
            with_vector=bool(r.get("with_vector")),
        )
        return {"points": [record(x) for x in recs]}

    def op_query(self, r):
        s = self.shard(r["collection"])[0]
        params = r.get("params") or {}
        req = q.QueryRequest(
            limit=r["limit"],
            offset=r.get("offset"),
            query=q.Query.Nearest(r["vector"], using=r.get("using") or None),
            with_vector=bool(r.get("with_vector")),
            with_payload=payload_selector(r.get("with_payload", False)),
            filter=filter_of(r.get("filter")),
            score_threshold=r.get("score_threshold"),
            params=q.SearchParams(hnsw_ef=params.get("hnsw_ef"), exact=bool(params.get("exact"))),
        )
        return {"points": [scored(x) for x in s.query(req)]}

    def op_ids(self, r):
        recs, _ = self.shard(r["collection"])[0].scroll(q.ScrollRequest(limit=1 << 30, with_payload=False))
        return {"ids": [id_out(x.id) for x in recs]}


def record(x):
    out = {"id": id_out(x.id)}
    if x.payload is not None:
        out["payload"] = x.payload
    v = vectors_out(x.vector)
    if v is not None:
        out["vectors"] = v
    return out


def scored(x):
    out = record(x)
    out["score"] = x.score
    return out


def answer(o, r):
    try:
        a = getattr(o, "op_" + r["op"])(r)
        a["ok"] = True
        return a
    except Exception as e:  # every failure is an answer: the suite compares them
        if "--trace" in sys.argv:
            traceback.print_exc()
        return {"error": "%s: %s" % (type(e).__name__, e)}


def main():
    o = Oracle()
    out = sys.stdout
    out.write(json.dumps({"qdrant_edge": importlib.metadata.version("qdrant-edge-py")}) + "\n")
    out.flush()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            r = json.loads(line)
            a = [answer(o, x) for x in r] if isinstance(r, list) else answer(o, r)
            out.write(json.dumps(a) + "\n")
            out.flush()
    finally:
        for name in list(o.shards):
            o.drop(name)
        shutil.rmtree(o.root, ignore_errors=True)


if __name__ == "__main__":
    main()
