"""A small RAG support assistant built on the libraries themselves, whose data Lethe erases.

Per tenant it writes, through each library's own API:
  - LangChain's QdrantVectorStore (langchain-qdrant, gRPC): collection rag_<tenant>, the
    knowledge base and every user message as a document;
  - LangGraph's PostgresSaver (langgraph-checkpoint-postgres): schema lg_<tenant>, one
    thread per session;
  - LangChain's RedisChatMessageHistory: message_store:<tenant>:<session>;
  - mem0 (offline: infer=False, a fake embedder): collection mem0_<tenant>, and mem0's own
    SQLite history file;
  - a ragas EvaluationDataset exported to JSONL and uploaded to S3 under <tenant>/ragas/.
Each write carries lineage (subject id, session id, tenant); data written before lineage
existed (legacy=True) carries the session only.

Commands (JSON on stdout, no personal data on stderr):
  converse   serve the demo conversations (DEMO) and export the evaluation set
  footprint  what each library still returns of each demo user
  erase      erase one user through Lethe (erasure.submit_and_wait), then prune mem0's history

Settings come from the environment: RAGAPP_QDRANT (host:grpc_port), RAGAPP_REDIS_URL,
RAGAPP_POSTGRES_DSN, RAGAPP_S3_ENDPOINT, RAGAPP_S3_BUCKET, RAGAPP_STATE_DIR (mem0's
history files), LETHE_URL and LETHE_TOKEN, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_REGION.
"""

import os

os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import sqlite3  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from typing import Optional  # noqa: E402

warnings.filterwarnings("ignore")

EMBED_DIM = 32

# The demo: per user, sessions written with lineage and legacy sessions written before
# lineage existed (by session only). Ids are chosen to trip careless matching: one user's
# id is a prefix of another's.
DEMO = {
    "user-ana": {
        "sessions": {
            "ana-s1": ["My parcel 4471 has not arrived yet.", "Can you send it to my office instead?"],
            "ana-s2": ["I would like a refund for the broken kettle."],
        },
        "legacy": {"ana-s0": ["Do you ship to Lisbon?", "I always order the blue model."]},
    },
    "user-anastasia": {
        "sessions": {"anastasia-s1": ["Is the warranty two years?", "My kettle is the silver one."]},
        "legacy": {},
    },
    "user-bob": {
        "sessions": {"bob-s1": ["How do I reset my router?"]},
        "legacy": {"bob-s0": ["Where is my invoice for March?"]},
    },
}

KNOWLEDGE_BASE = [
    "Parcels arrive within five working days; a redirect costs nothing before dispatch.",
    "Refunds for damaged goods are paid within 14 days of the return.",
    "The warranty on kettles is two years from delivery.",
    "Routers reset with a ten second press on the pin button.",
]


def env(name, default=None):
    v = os.environ.get(name, default)
    if v is None:
        sys.exit(f"ragapp: {name} is not set")
    return v


def user_messages(user):
    d = DEMO[user]
    return [m for msgs in list(d["sessions"].values()) + list(d["legacy"].values()) for m in msgs]


def user_sessions(user):
    d = DEMO[user]
    return list(d["sessions"]) + list(d["legacy"])


class RagApp:
    """One tenant's RAG app: its clients of every store."""

    def __init__(self, tenant):
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient, models

        self.tenant = tenant
        host, port = env("RAGAPP_QDRANT").rsplit(":", 1)
        # The emulator (and many deployments) serve gRPC only.
        self.qdrant = QdrantClient(host=host, grpc_port=int(port), prefer_grpc=True, check_compatibility=False)
        self.embeddings = DeterministicFakeEmbedding(size=EMBED_DIM)
        self.collection = f"rag_{tenant}"
        if not self.qdrant.collection_exists(self.collection):
            self.qdrant.create_collection(self.collection, vectors_config=models.VectorParams(size=EMBED_DIM, distance=models.Distance.COSINE))
        self.vectors = QdrantVectorStore(client=self.qdrant, collection_name=self.collection, embedding=self.embeddings)
        self.redis_url = env("RAGAPP_REDIS_URL")
        self._checkpointer = None
        self._graph = None
        self._memory = None
        self.samples = []

    # --- LangGraph on PostgreSQL -------------------------------------------------------
    @property
    def checkpointer(self):
        if self._checkpointer is None:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row

            dsn = env("RAGAPP_POSTGRES_DSN")
            schema = f"lg_{self.tenant}"
            with psycopg.connect(dsn, autocommit=True) as c:
                c.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            # One schema per tenant: the saver's tables carry no tenant column.
            self._pg = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                                       options=f"-c search_path={schema}")
            self._checkpointer = PostgresSaver(self._pg)
            self._checkpointer.setup()
        return self._checkpointer

    @property
    def graph(self):
        if self._graph is None:
            from langgraph.graph import END, START, MessagesState, StateGraph
            from langchain_core.messages import AIMessage
            from qdrant_client import models

            app = self

            class State(MessagesState):
                contexts: list

            def retrieve(state, config):
                c = config["configurable"]
                should = [models.FieldCondition(key="metadata.source", match=models.MatchValue(value="kb")),
                          models.FieldCondition(key="metadata.session_id", match=models.MatchValue(value=c["thread_id"]))]
                if c.get("user_id"):
                    should.append(models.FieldCondition(key="metadata.subject_id", match=models.MatchValue(value=c["user_id"])))
                docs = app.vectors.similarity_search(state["messages"][-1].content, k=3, filter=models.Filter(should=should))
                return {"contexts": [d.page_content for d in docs]}

            def respond(state):
                # A deterministic stand-in for a chat model: answers from the best context.
                best = state["contexts"][0] if state["contexts"] else "I will look into it."
                return {"messages": [AIMessage(content="Thanks for asking. " + best)]}

            g = StateGraph(State)
            g.add_node("retrieve", retrieve)
            g.add_node("respond", respond)
            g.add_edge(START, "retrieve")
            g.add_edge("retrieve", "respond")
            g.add_edge("respond", END)
            self._graph = g.compile(checkpointer=self.checkpointer)
        return self._graph

    # --- mem0 ------------------------------------------------------------------------------
    @property
    def history_path(self):
        return os.path.join(env("RAGAPP_STATE_DIR"), f"mem0-history-{self.tenant}.db")

    @property
    def memory(self):
        if self._memory is None:
            from langchain_core.language_models.fake_chat_models import FakeListChatModel
            from mem0 import Memory

            self._memory = Memory.from_config({
                "vector_store": {"provider": "qdrant", "config": {"client": self.qdrant, "collection_name": f"mem0_{self.tenant}",
                                                                  "embedding_model_dims": EMBED_DIM}},
                "embedder": {"provider": "langchain", "config": {"model": self.embeddings}},
                # Never called with infer=False; mem0 builds an LLM client at start.
                "llm": {"provider": "langchain", "config": {"model": FakeListChatModel(responses=["{}"])}},
                "history_db_path": self.history_path,
            })
        return self._memory

    # --- one turn --------------------------------------------------------------------------
    def lineage(self, subject, session, legacy):
        if legacy:
            return {"session_id": session}
        return {"subject_id": subject, "session_id": session, "tenant": self.tenant}

    def turn(self, subject, session, text, legacy=False):
        from langchain_community.chat_message_histories import RedisChatMessageHistory
        from langchain_core.documents import Document
        from langchain_core.messages import HumanMessage

        configurable = {"thread_id": session}
        if not legacy:
            configurable.update(user_id=subject, tenant=self.tenant)
        out = self.graph.invoke({"messages": [HumanMessage(content=text)], "contexts": []}, {"configurable": configurable})
        answer = out["messages"][-1].content
        history = RedisChatMessageHistory(session, url=self.redis_url, key_prefix=f"message_store:{self.tenant}:")
        history.add_user_message(text)
        history.add_ai_message(answer)
        self.vectors.add_documents([Document(page_content=text, metadata=self.lineage(subject, session, legacy))])
        if legacy:  # mem0 needs one of user_id, agent_id, run_id
            self.memory.add(text, run_id=session, infer=False)
        else:
            self.memory.add(text, user_id=subject, run_id=session, metadata={"tenant": self.tenant}, infer=False)
        self.samples.append(lineage_sample()(user_input=text, retrieved_contexts=out["contexts"], response=answer,
                                   **self.lineage(subject, session, legacy)))

    def seed_knowledge_base(self):
        from langchain_core.documents import Document

        self.vectors.add_documents([Document(page_content=t, metadata={"source": "kb", "tenant": self.tenant}) for t in KNOWLEDGE_BASE])

    # --- ragas in S3 -----------------------------------------------------------------------
    def s3(self):
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=env("RAGAPP_S3_ENDPOINT"), region_name=os.environ.get("AWS_REGION", "us-east-1"),
                            config=Config(s3={"addressing_style": "path"}))

    @property
    def eval_key(self):
        return f"{self.tenant}/ragas/support-eval.jsonl"

    def export_evals(self):
        from ragas import EvaluationDataset

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "eval.jsonl")
            EvaluationDataset(samples=self.samples).to_jsonl(path)
            with open(path, "rb") as f:
                self.s3().put_object(Bucket=env("RAGAPP_S3_BUCKET"), Key=self.eval_key, Body=f.read(), ContentType="application/jsonl")

    def eval_versions(self):
        """Every stored version of the evaluation set, newest first, each reloaded by ragas."""
        from ragas import EvaluationDataset

        s3, bucket = self.s3(), env("RAGAPP_S3_BUCKET")
        versions = s3.list_object_versions(Bucket=bucket, Prefix=self.eval_key).get("Versions", [])
        versions.sort(key=lambda v: v["LastModified"], reverse=True)
        out = []
        with tempfile.TemporaryDirectory() as d:
            for v in versions:
                if v["Key"] != self.eval_key:
                    continue
                body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
                path = os.path.join(d, "v.jsonl")
                with open(path, "wb") as f:
                    f.write(body)
                out.append((v["IsLatest"], EvaluationDataset.from_jsonl(path), [json.loads(l) for l in body.splitlines() if l.strip()]))
        return out

    # --- read back --------------------------------------------------------------------------
    def footprint(self, subject, sessions, messages, evals=None):
        """What each library returns of subject (by its id or any of its sessions)."""
        from langchain_community.chat_message_histories import RedisChatMessageHistory
        from qdrant_client import models

        counts = {}
        flt = models.Filter(should=[models.FieldCondition(key="metadata.subject_id", match=models.MatchValue(value=subject)),
                                    models.FieldCondition(key="metadata.session_id", match=models.MatchAny(any=sessions))])
        counts["langchain-qdrant similarity_search"] = len(self.vectors.similarity_search(messages[0], k=100, filter=flt))
        points, _ = self.qdrant.scroll(self.collection, scroll_filter=flt, limit=1000, with_payload=True)
        counts["qdrant scroll (langchain docs)"] = len(points)

        seen = set()
        for c in self.checkpointer.list(None, filter={"user_id": subject}):
            seen.add(c.config["configurable"]["checkpoint_id"])
        for s in sessions:
            for c in self.checkpointer.list({"configurable": {"thread_id": s}}):
                seen.add(c.config["configurable"]["checkpoint_id"])
        counts["langgraph PostgresSaver.list"] = len(seen)

        counts["RedisChatMessageHistory messages"] = sum(
            len(RedisChatMessageHistory(s, url=self.redis_url, key_prefix=f"message_store:{self.tenant}:").messages) for s in sessions)

        ids = {m["id"] for m in self.memory.get_all(filters={"user_id": subject}, top_k=1000)["results"]}
        for s in sessions:
            ids |= {m["id"] for m in self.memory.get_all(filters={"run_id": s}, top_k=1000)["results"]}
        counts["mem0 get_all"] = len(ids)

        # mem0's history rows carry no user id: read them by the memory text they hold.
        counts["mem0 history.db rows (app prunes)"] = self.history_rows(messages)

        if evals is None:
            evals = self.eval_versions()
        latest = [ds for is_latest, ds, _ in evals if is_latest]
        counts["ragas EvaluationDataset samples"] = sum(1 for ds in latest for s in ds if s.user_input in messages)
        counts["ragas older S3 versions' samples"] = sum(1 for is_latest, ds, _ in evals if not is_latest for s in ds if s.user_input in messages)
        return counts

    def history_rows(self, messages):
        if not os.path.exists(self.history_path):
            return 0
        with sqlite3.connect(self.history_path) as db:
            q = ",".join("?" * len(messages))
            return db.execute(f"SELECT COUNT(*) FROM history WHERE new_memory IN ({q}) OR old_memory IN ({q})",
                              messages + messages).fetchone()[0]

    # --- erasure ---------------------------------------------------------------------------
    def sessions_of(self, subject):
        """The sessions the app's own stores tie to subject: its LangGraph threads and mem0 runs."""
        found = {c.config["configurable"]["thread_id"] for c in self.checkpointer.list(None, filter={"user_id": subject})}
        found |= {m["run_id"] for m in self.memory.get_all(filters={"user_id": subject}, top_k=1000)["results"] if m.get("run_id")}
        return found

    def prune_memory_history(self):
        """Deletes mem0 history rows of memories no longer in the mem0 collection (Lethe erased
        them): mem0 keeps their text in its local SQLite file, which Lethe cannot reach."""
        if not os.path.exists(self.history_path):
            return 0
        with sqlite3.connect(self.history_path) as db:
            ids = [r[0] for r in db.execute("SELECT DISTINCT memory_id FROM history")]
            gone = [i for i in ids if not self.qdrant.retrieve(f"mem0_{self.tenant}", ids=[i], with_payload=False)]
            n = 0
            for i in gone:
                n += db.execute("DELETE FROM history WHERE memory_id = ?", (i,)).rowcount
            db.commit()
            db.execute("VACUUM")
        return n


@functools.cache
def lineage_sample():
    """The ragas sample class with the app's lineage, built on first use (importing ragas
    is slow): to_jsonl writes the extra fields beside ragas's own; from_jsonl reads samples
    back as SingleTurnSample, without them."""
    from ragas import SingleTurnSample

    class LineageSample(SingleTurnSample):
        tenant: Optional[str] = None
        subject_id: Optional[str] = None
        session_id: Optional[str] = None

    return LineageSample


def converse(tenant):
    app = RagApp(tenant)
    app.seed_knowledge_base()
    turns = 0
    # Legacy first: the pre-lineage version of the app wrote them, and exported once.
    for user, d in DEMO.items():
        for session, msgs in d["legacy"].items():
            for m in msgs:
                app.turn(None, session, m, legacy=True)
                turns += 1
    app.export_evals()
    for user, d in DEMO.items():
        for session, msgs in d["sessions"].items():
            for m in msgs:
                app.turn(user, session, m)
                turns += 1
    app.export_evals()
    return {"tenant": tenant, "turns": turns, "users": len(DEMO)}


def footprint(tenant):
    app = RagApp(tenant)
    evals = app.eval_versions()
    return {u: app.footprint(u, user_sessions(u), user_messages(u), evals) for u in DEMO}


def erase(tenant, subject, sessions):
    from erasure import submit_and_wait

    app = RagApp(tenant)
    found = app.sessions_of(subject)
    done = submit_and_wait(env("LETHE_URL"), tenant, subject, sorted(found | set(sessions)),
                           token=os.environ.get("LETHE_TOKEN"))
    pruned = app.prune_memory_history()
    return {"receipt": done["receipt"], "receipt_hash_recomputed": done["hash_recomputed"],
            "chain_records_verified": done["chain_records"], "sessions_found_in_stores": len(found),
            "sessions_named": len(set(sessions)), "mem0_history_rows_pruned": pruned}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("converse")
    c.add_argument("--tenant", required=True)
    f = sub.add_parser("footprint")
    f.add_argument("--tenant", required=True)
    e = sub.add_parser("erase")
    e.add_argument("--tenant", required=True)
    e.add_argument("--subject", required=True)
    e.add_argument("--session", action="append", default=[], help="a session the stores do not tie to the subject (repeatable)")
    a = p.parse_args()
    if a.cmd == "converse":
        out = converse(a.tenant)
    elif a.cmd == "footprint":
        out = footprint(a.tenant)
    else:
        out = erase(a.tenant, a.subject, a.session)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
