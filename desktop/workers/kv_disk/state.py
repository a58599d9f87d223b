"""What a KV snapshot says about its conversation besides the tensors (torch-free): the ids its
KV holds, the canonical ids and bounds of its messages, their chained hashes (what the matcher
looks up), the messages themselves (images by digest: their KV is in the snapshot, their pixels
are not needed again) and the saved conversation's id. Kept as JSON in the file's metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass

from desktop.model.images import ImageData
from desktop.model.messages import Message, prefix_hashes


@dataclass(frozen=True, slots=True)
class SnapState:
    ids: tuple[int, ...]
    msgs: tuple[Message, ...]
    hashes: tuple[bytes, ...]
    canon: tuple[int, ...]
    bounds: tuple[int, ...]
    conversation: str = ""

    @classmethod
    def of(cls, slot) -> "SnapState":
        """The state of an idle slot (workers.slots.Slot) that holds a provable conversation."""
        return cls(tuple(slot.ids), tuple(slot.msgs), tuple(slot.hashes), tuple(slot.canon), tuple(slot.bounds),
                   getattr(slot, "conversation", ""))

    @property
    def key(self) -> str:
        """The branch's name in the folder: the hex of its last chained hash."""
        return self.hashes[-1].hex()

    def to_json(self) -> str:
        msgs = [[m.role, m.content, [[i.sha256.hex(), i.mime, i.width, i.height] for i in m.images]] for m in self.msgs]
        return json.dumps({"ids": self.ids, "msgs": msgs, "canon": self.canon, "bounds": self.bounds,
                           "conversation": self.conversation}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "SnapState":
        """The state back; ValueError (or KeyError/TypeError) when the text is not a consistent one."""
        raw = json.loads(text)
        msgs = tuple(Message(role, content, tuple(ImageData(b"", bytes.fromhex(h), mime, int(w), int(ht))
                                                  for h, mime, w, ht in images))
                     for role, content, images in raw["msgs"])
        state = cls(tuple(int(i) for i in raw["ids"]), msgs, tuple(prefix_hashes(msgs)),
                    tuple(int(i) for i in raw["canon"]), tuple(int(b) for b in raw["bounds"]),
                    str(raw.get("conversation", "")))
        if not msgs or len(state.bounds) != len(msgs) or state.bounds[-1] != len(state.canon):
            raise ValueError("the snapshot's messages and bounds disagree")
        if not state.ids:
            raise ValueError("the snapshot holds no ids")
        return state
