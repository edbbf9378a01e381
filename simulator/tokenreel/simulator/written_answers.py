'''Written answers to the first built-in prompts (ladder4's, and mixed's first three of each
category in assets/tokenreel/assets/prompts/), so a demo shows a reply about its own prompt.

Each entry is (answer id, category, prompt text, answer). The simulator picks an entry by the
exact prompt text (whitespace collapsed); any other prompt falls back to text.py's category
pools. Every answer runs past 512 tokens (the shipped config's forced length) before it ends.
'''

from __future__ import annotations

_CODE_INTERVALS = '''Sort by start, then merge in a single sweep:

```python
def merge_intervals(
    intervals: list[tuple[float, float]],
) -> list[tuple[float, float]]:
    """Merge overlapping (start, end) intervals, sorted by start.

    >>> merge_intervals([(1, 3), (2, 6), (8, 10)])
    [(1, 6), (8, 10)]
    >>> merge_intervals([(5, 7), (1, 5)])
    [(1, 7)]
    >>> merge_intervals([(1, 10), (2, 3)])
    [(1, 10)]
    """
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
```

How it works:

1. `sorted(intervals)` orders the pairs by start time (ties by end time), so any interval \
that overlaps the current merged block must come right after it.
2. If the next interval starts before or exactly when the last merged block ends, the \
two overlap, and the block is extended to the later of the two ends. `max` matters: an \
interval can lie entirely inside the previous one, as in the third doctest.
3. Otherwise there is a gap, and the interval starts a new block.

Sorting dominates, so the function runs in O(n log n) time and O(n) extra space. It never \
mutates its input, and an empty list gives an empty list.

A few choices worth knowing about:

- **Touching intervals are merged**, because of `<=`: `(1, 5)` and `(5, 7)` become \
`(1, 7)`. If they should stay separate, for example as half-open booking slots, use `<`.
- **Times are plain numbers** here, such as minutes since midnight or Unix timestamps; \
`int` values are accepted wherever `float` is annotated.
- **Invalid input is not checked.** If an interval may end before it starts, reject it \
early with `if end < start: raise ValueError(...)` inside the loop.

To merge `datetime` values, keep the body and make the hints generic:

```python
from datetime import datetime
from typing import TypeVar

T = TypeVar("T", int, float, datetime)


def merge_times(intervals: list[tuple[T, T]]) -> list[tuple[T, T]]:
    """Like merge_intervals, for numbers or datetimes.

    >>> day = datetime(2024, 5, 6)
    >>> busy = merge_times([(day.replace(hour=9), day.replace(hour=11)),
    ...                     (day.replace(hour=10), day.replace(hour=12))])
    >>> [(a.hour, b.hour) for a, b in busy]
    [(9, 12)]
    """
    merged: list[tuple[T, T]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
```

Run the doctests with `python -m doctest intervals.py -v`. If \
intervals arrive one at a time and you need the merged view after each insertion, keep \
the blocks in a sorted list and use `bisect` to find the neighbours of each new \
interval, instead of sorting everything again on every update.'''

_CODE_LRU = '''An LRU cache needs two operations to be O(1): finding a key, and moving a key to the \
"most recently used" end (or evicting from the other end). No single built-in structure \
does both, so we combine two:

- a **hash map** (`dict`) from key to node, for O(1) lookup;
- a **doubly linked list** of nodes in usage order, for O(1) reordering and eviction.

```python
from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Node(Generic[K, V]):
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key: K, value: V) -> None:
        self.key = key
        self.value = value
        self.prev: _Node[K, V] = self
        self.next: _Node[K, V] = self


class LRUCache(Generic[K, V]):
    """A fixed-size cache that evicts the least recently used key."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._nodes: dict[K, _Node[K, V]] = {}
        # A sentinel node closes the ring: sentinel.next is the most
        # recently used entry, sentinel.prev the least recently used.
        self._sentinel: _Node[K, V] = _Node(None, None)  # type: ignore

    def __len__(self) -> int:
        return len(self._nodes)

    def _unlink(self, node: _Node[K, V]) -> None:
        node.prev.next = node.next
        node.next.prev = node.prev

    def _push_front(self, node: _Node[K, V]) -> None:
        first = self._sentinel.next
        node.prev, node.next = self._sentinel, first
        first.prev = node
        self._sentinel.next = node

    def get(self, key: K, default: V | None = None) -> V | None:
        """Return the value for key and mark it as recently used."""
        node = self._nodes.get(key)
        if node is None:
            return default
        self._unlink(node)
        self._push_front(node)
        return node.value

    def put(self, key: K, value: V) -> None:
        """Insert or update key, evicting the LRU entry when full."""
        node = self._nodes.get(key)
        if node is not None:
            node.value = value
            self._unlink(node)
        else:
            if len(self._nodes) == self.capacity:
                lru = self._sentinel.prev
                self._unlink(lru)
                del self._nodes[lru.key]
            node = _Node(key, value)
            self._nodes[key] = node
        self._push_front(node)
```

Why each piece is there:

1. **The dict** gives average O(1) access from a key to its node. Without it, finding a \
key in the list would be O(n).
2. **The doubly linked list** keeps the usage order. Because every node knows both \
neighbours, `_unlink` removes it in O(1) without searching, and `_push_front` puts it at \
the front in O(1). A singly linked list would need the previous node, which means a scan.
3. **The sentinel** turns the list into a ring, so there are no `None` checks for an \
empty list or for the first and last node: every real node always has two neighbours.
4. **Nodes store their key**, so when we evict `sentinel.prev` we know which dict entry \
to delete.

Both `get` and `put` do a constant number of dict operations and pointer updates, so \
both are O(1); memory is O(capacity).

```python
cache: LRUCache[str, int] = LRUCache(2)
cache.put("a", 1)
cache.put("b", 2)
cache.get("a")     # 1, and "a" is now the most recent
cache.put("c", 3)  # evicts "b", the least recently used
cache.get("b")     # None
```

In production Python you can get the same behaviour from `collections.OrderedDict`, \
which is itself a dict plus a doubly linked list: `move_to_end(key)` on a hit and \
`popitem(last=False)` to evict. For caching function results, `functools.lru_cache` is \
already built in. Writing it by hand, as above, is mostly useful to see why the two \
structures are needed together, which is exactly what interviewers ask about.'''

_CODE_ISO = '''The trailing `Z` is the culprit. It is the ISO 8601 way of writing UTC ("Zulu \
time"), and APIs send it all the time, but before Python 3.11 `datetime.fromisoformat()` \
only accepted the format that `datetime.isoformat()` itself produces, which writes UTC \
as `+00:00`. So `"2024-03-01T12:30:00Z"` raised `ValueError: Invalid isoformat string`.

There is a second, quieter problem: strings without any offset parse to *naive* \
datetimes, and comparing a naive datetime with an aware one raises `TypeError`. Here is \
a fixed version that handles both:

```python
from datetime import datetime, timezone, tzinfo


def parse_iso_datetime(text: str, assume: tzinfo = timezone.utc) -> datetime:
    """Parse an ISO 8601 timestamp into a timezone-aware datetime.

    A trailing "Z" means UTC, an explicit offset is kept as given, and a
    timestamp without an offset is taken to be in the `assume` zone.

    >>> parse_iso_datetime("2024-03-01T12:30:00Z")
    datetime.datetime(2024, 3, 1, 12, 30, tzinfo=datetime.timezone.utc)
    >>> parse_iso_datetime("2024-03-01T12:30:00+02:00").utcoffset()
    datetime.timedelta(seconds=7200)
    >>> parse_iso_datetime("2024-03-01 12:30").tzinfo
    datetime.timezone.utc
    """
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not an ISO 8601 timestamp: {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=assume)
    return parsed


def to_utc(text: str) -> datetime:
    """Parse a timestamp and convert it to UTC, for storage and comparison."""
    return parse_iso_datetime(text).astimezone(timezone.utc)
```

What changed and why:

1. **`Z` becomes `+00:00`** before parsing, so the function works the same on every \
Python 3 version, not only on 3.11 and later. Lowercase `z` is accepted too, since some \
systems emit it.
2. **Naive results get a zone.** The `assume` parameter makes the choice explicit \
instead of silently mixing naive and aware values. If your inputs are local times, pass \
the right zone, for example `ZoneInfo("Europe/Berlin")` from the standard `zoneinfo` \
module, which also gets daylight saving time right.
3. **Offsets are preserved.** `+02:00` stays `+02:00`; call `to_utc()` when you need one \
common zone, for example before sorting or storing timestamps in a database.
4. **Errors name the input.** Re-raising with the original text makes log messages \
useful, and `from None` hides the less helpful internal traceback.

A quick check that the fix works:

```python
assert to_utc("2024-03-01T12:30:00Z") == to_utc("2024-03-01T14:30:00+02:00")
assert parse_iso_datetime("2024-03-01T12:30:00.250Z").microsecond == 250000
```

If you need to accept the full range of ISO 8601 (week dates like `2024-W09-5`, or \
durations), use a dedicated parser such as `dateutil.parser.isoparse`; for timestamps \
coming from JSON APIs, the function above is usually all you need.'''

_REASONING_TRAIN = '''Let's work through it step by step.

**Step 1: driving time.** The train covers 312 km at an average of 96 km/h while moving:

312 ÷ 96 = 3.25 hours

**Step 2: convert to hours and minutes.** 0.25 hours is 0.25 × 60 = 15 minutes, so the \
train is moving for 3 hours 15 minutes.

**Step 3: add the stop.** The 7-minute stop halfway (after 156 km) adds to the journey:

3 h 15 min + 7 min = 3 h 22 min

**Step 4: add the journey to the departure time.**

09:40 + 3 h = 12:40
12:40 + 22 min = 13:02

**Step 5: check the answer.** Each half is 156 km, and 156 ÷ 96 = 1.625 hours, which is \
1 hour 37.5 minutes. So the train reaches the halfway point at 09:40 + 1:37.5 = \
11:17:30, waits until 11:24:30, and then needs another 1 hour 37.5 minutes: \
11:24:30 + 1:37:30 = 13:02:00. Both ways of counting give the same result.

**Step 6: a sanity check on the overall speed.** Door to door, the journey takes \
3 h 22 min, which is 202 minutes or about 3.37 hours. The overall average speed is \
therefore 312 ÷ 3.37 ≈ 92.7 km/h. That is a little below 96 km/h, exactly as it should \
be: the stop adds 7 minutes without adding any distance.

**A note on the wording.** I read "an average of 96 km/h" as the average speed while \
the train is moving, which is how timetables usually state it. If instead the 96 km/h \
were the average over the whole trip, stop included, the total time would be exactly \
3.25 hours and the train would arrive at 09:40 + 3:15 = 12:55; the stop would then only \
mean that it has to run a little faster between stations, at 312 ÷ (3.25 − 7/60) ≈ \
99.6 km/h while moving.

| | Time |
|---|---|
| Departure | 09:40 |
| Halfway (156 km) | 11:17:30 |
| Stop ends | 11:24:30 |
| Arrival | 13:02 |

**Answer:** the train arrives at **13:02**, after 3 hours 22 minutes: 3 hours 15 \
minutes of driving plus the 7-minute stop.'''

_REASONING_PENS = '''We want the largest number of pens for at most 50.00, mixing packs \
of 6 (4.20) and packs of 10 (6.50).

**Step 1: compare the price per pen.**
- Pack of 6: 4.20 ÷ 6 = 0.70 per pen.
- Pack of 10: 6.50 ÷ 10 = 0.65 per pen.

The packs of 10 are cheaper per pen, so we should buy as many of them as we can and \
then use the change for packs of 6. But a greedy choice is not always optimal with \
whole packs, so let's check every option.

**Step 2: try each number of 10-packs.** Let b be the number of 10-packs and a the \
number of 6-packs. The cost is 6.50b + 4.20a, and it must not exceed 50.00.

- b = 7: 45.50 spent, 4.50 left, so a = 1 (4.20). Cost 49.70, pens 70 + 6 = **76**.
- b = 6: 39.00 spent, 11.00 left, so a = 2 (8.40). Cost 47.40, pens 60 + 12 = 72.
- b = 5: 32.50 spent, 17.50 left, so a = 4 (16.80). Cost 49.30, pens 50 + 24 = 74.
- b = 4: 26.00 spent, 24.00 left, so a = 5 (21.00). Cost 47.00, pens 40 + 30 = 70.
- b = 3: 19.50 spent, 30.50 left, so a = 7 (29.40). Cost 48.90, pens 30 + 42 = 72.
- b = 2: 13.00 spent, 37.00 left, so a = 8 (33.60). Cost 46.60, pens 20 + 48 = 68.
- b = 1: 6.50 spent, 43.50 left, so a = 10 (42.00). Cost 48.50, pens 10 + 60 = 70.
- b = 0: a = 11 (46.20), pens 66.

**Step 3: can we spend exactly 50.00?** In cents we would need 420a + 650b = 5000, or \
42a + 65b = 500 after dividing by 10. Working modulo 42, that needs 23b ≡ 38, which \
gives b ≡ 40 (mod 42). That is far more than 7 packs, so no combination costs exactly \
50.00. The best we can do is to spend as much as possible on the cheaper pens.

**Step 4: check the best option.** 7 × 6.50 = 45.50 and 1 × 4.20 = 4.20, together \
49.70, which is within the budget, with 0.30 left over. An eighth 10-pack would cost \
52.00 in total, which is too much, and replacing the 6-pack with anything else gives \
fewer pens, as the table above shows.

**Answer:** buy **7 packs of 10 and 1 pack of 6**, for **76 pens** at a cost of 49.70. \
Exactly 50.00 cannot be spent with these two pack sizes, so 0.30 remains as change.'''

_REASONING_BILL = '''Let's set up the relationships and solve step by step.

**Step 1: name the unknown.** Let Chen's share be c.

**Step 2: write everyone's share in terms of c.**
- Ben pays twice what Chen pays: Ben = 2c.
- Ana pays 15 more than Ben: Ana = 2c + 15.

**Step 3: the shares add up to the bill.**

c + 2c + (2c + 15) = 187.50

**Step 4: simplify.** Collect the c terms: c + 2c + 2c = 5c, so

5c + 15 = 187.50

**Step 5: solve for c.** Subtract 15 from both sides:

5c = 172.50

Divide by 5:

c = 34.50

**Step 6: work out the other shares.**
- Chen: c = **34.50**
- Ben: 2 × 34.50 = **69.00**
- Ana: 69.00 + 15 = **84.00**

**Step 7: check every condition.**
- The total: 34.50 + 69.00 + 84.00 = 187.50. ✓
- Ana pays 15 more than Ben: 84.00 − 69.00 = 15.00. ✓
- Ben pays twice what Chen pays: 2 × 34.50 = 69.00. ✓

All three conditions hold, so the answer is consistent.

**Another way to see it.** Imagine first taking Ana's extra 15 off the bill: 187.50 − \
15 = 172.50 is what remains to be split in the ratio Chen : Ben : Ana = 1 : 2 : 2. That \
is 5 equal parts, and each part is 172.50 ÷ 5 = 34.50. Chen gets one part (34.50), Ben \
two parts (69.00), and Ana two parts plus the 15 (84.00). This is the same calculation \
written as shares of a whole, and it is a handy way to check this kind of problem in \
your head.

**As percentages of the bill**, for a sense of how uneven the split is:
- Chen: 34.50 ÷ 187.50 = 18.4%
- Ben: 69.00 ÷ 187.50 = 36.8%
- Ana: 84.00 ÷ 187.50 = 44.8%

These add up to 100%, as they should.

**Answer:** Ana pays **84.00**, Ben pays **69.00** and Chen pays **34.50**.'''

_PROSE_NIGHT_TRAINS = '''# The Return of the Night Train

For most of the last thirty years, the European night train looked like a museum piece. \
Budget airlines could carry a passenger from Brussels to Rome for less than the price of \
a couchette, high-speed lines shortened the journeys that sleepers used to own, and \
national railways quietly closed route after route. In 2016 Deutsche Bahn, the largest \
operator on the continent, gave up its sleeper services entirely. Yet a decade later \
night trains are running again on routes that had been written off. This is not \
nostalgia. The night train is returning because it solves three problems that the \
plane cannot: the value of time, the cost of carbon, and the friction of travel itself.

## Selling time, not speed

The usual comparison between train and plane measures speed, and on speed the plane \
wins. But a night train does not sell speed; it sells time that the traveller would \
otherwise lose. A business traveller who boards in Vienna at nine in the evening and \
wakes up in Paris or Brussels has spent no working hours travelling, and has saved a \
hotel night. A flight that takes ninety minutes in the air still costs half a day once \
the trip to the airport, security, boarding and the ride into the city are counted. \
When Austria's ÖBB took over the routes Deutsche Bahn had abandoned and relaunched them \
under the Nightjet brand, it bet on exactly this argument, and its trains on the core \
routes are often sold out weeks in advance.

## The carbon argument

The second reason is climate. Aviation is one of the hardest sectors to decarbonise, \
and per passenger a train journey emits a small fraction of the carbon of a flight over \
the same distance. In Sweden the word flygskam, flight shame, entered everyday language \
in 2018, and the debate it started spread across Europe. Governments followed: France \
has banned domestic flights on routes where a train can do the journey in under two and \
a half hours, and several states now subsidise or directly order night services. New \
operators have appeared as well. European Sleeper, a small cooperative company, began \
running between Brussels, Amsterdam and Berlin in 2023, funded in part by thousands of \
small investors who wanted such a train to exist.

## Travel as part of the journey

The third reason is harder to measure. Airports have become places to endure rather than \
to enjoy, while a sleeper offers a small private room, a window and the feeling of \
crossing a continent instead of skipping over it. For families, it means children \
asleep in bunks instead of queues at security; for older passengers, no long walks \
through terminals.

## What still stands in the way

None of this makes the revival secure. Sleeper carriages are expensive, and for years \
almost nobody built them, so operators cannot add trains as fast as demand grows. Track \
access charges in some countries make a night run costlier than it should be, and every \
border still brings different signalling, electrical systems and rules. Until these \
obstacles are addressed at a European level, the night train will remain a growing \
niche rather than the backbone it could be.'''

_PROSE_LIGHTHOUSE = '''The supply boat came on Thursdays, weather permitting, and that \
Thursday the weather permitted only just. Matthias Brandt stood on the slipway with his \
collar turned up while Olav threw him the sack of post and a crate of tinned food, and \
shouted something about the forecast that the wind carried away.

Most of the post was for the lighthouse service: forms, a new logbook, a circular about \
batteries. But at the bottom of the sack there was a letter in an envelope of thick \
cream paper, addressed by hand in blue ink.

*Miss Ingrid Sand, The Lighthouse, Skarvøy.*

Matthias read it twice. There was no Ingrid on the island. There was no one on Skarvøy \
at all except himself, the gulls and, in summer, a few birdwatchers who never stayed the \
night. He had kept the light for eleven years, and the keeper before him had been a man \
called Henrik, who had kept it for thirty.

The postmark was from Montreal, dated three weeks earlier.

He did not open the letter. He put it on the shelf above the stove, next to the barometer, \
and for two days it watched him while he worked. On the third evening he took down the \
oldest of the logbooks, the ones bound in green cloth, and began to read.

He found her in the entries for the spring of 1984, in Henrik's careful, slanting hand. \
*Ingrid helped with the lamp tonight. She has steadier hands than I have.* And later, in \
October: *Ingrid left on the boat this morning. Wind north-west, visibility good.* After \
that the entries went back to wind and visibility, and her name did not appear again.

Forty years. Matthias sat with the book open on his knees and listened to the light \
turning above him, the faint mechanical sigh it made at the top of each rotation.

On Thursday he gave the envelope back to Olav.

"Wrong address," Olav said, squinting at it. "Return to sender?"

"No," said Matthias. He had written something on the back, under the flap, in pencil: \
*She left in October 1984. Her father kept the light until 2013. The lamp still turns. \
If you want to see it, the boat comes on Thursdays.* "Send it on. Put it back in the \
post."

Olav looked at him for a long moment, then shrugged and put it in the sack.

Spring came slowly that year. In May, on a Thursday with a flat grey sea, the boat \
brought an old woman in a red coat who stepped onto the slipway as though she had \
never learned to do it any other way. She did not say who she was, and Matthias did not \
ask. He simply showed her the stairs, and she climbed them ahead of him, one hand on \
the rail, counting under her breath, the way people do when they are remembering a \
number they have not needed for a very long time.'''

_PROSE_SEASONS = '''# A Year at the Edge of the Sea

In winter the town belongs to the people who live in it. There are perhaps nine hundred \
of them, and from November to March you can learn most of their faces in a week. The \
ice-cream kiosk on the harbour wall is boarded up, the campsite behind the dunes is a \
field of puddles, and the bakery opens an hour later because nobody is queuing at seven. \
Storms arrive from the west with a day's warning, and the fishermen haul their boats \
higher up the slipway and spend the mornings mending nets in the shed by the lifeboat \
station. On the worst nights the waves come over the sea wall and leave seaweed on the \
promenade, and in the morning the children are sent to school in wellington boots.

## Spring

Spring begins not with flowers but with paint. In March, on the first dry weekend, the \
owners of the guest houses appear on ladders with tins of white and pale blue, and the \
smell of fresh paint drifts along the front. The ferry timetable changes from two \
crossings a day to four. The café by the lighthouse puts its tables outside, though for \
weeks nobody sits at them for long. In the dunes the marram grass turns green, the \
lapwings return to the marsh behind the town, and on a clear evening in April the light \
stays on the water until almost nine o'clock.

## Summer

By July the population has tripled. Cars with roof boxes crawl along the single road \
into town, the car park behind the church fills before ten, and the harbour is crowded \
with yachts whose owners speak four languages. The fishmonger sells out of crab by noon \
and the queue for chips reaches the corner. Locals adjust their lives around it: they \
shop early, swim at the far end of the beach where the path is too steep for strollers, \
and meet each other in the evenings when the day visitors have gone home. The festival \
in August, with its brass band and its raft race across the harbour, is the one moment \
when residents and visitors stand shoulder to shoulder and nobody can tell them apart.

## Autumn

Then, almost overnight, the town exhales. The first week of September the schools go \
back, and the beach is suddenly wide and empty again. This is the season many residents \
love most. The sea is still warm enough for a brave swim, the light turns golden and low, \
and the guest houses hang signs that say "vacancies" in their windows. Boats are lifted \
out of the water onto trailers and wrapped in blue tarpaulin. The swallows gather on \
the telephone wires above the post office, and one morning they are gone.

## And back again

By late October the kiosk is boarded up once more, the storms return, and the town \
shrinks back to its nine hundred faces. It is tempting to describe this cycle as a town \
that sleeps and wakes, but that is the visitor's view. For the people who stay, winter \
is not a pause. It is the season in which the town is most itself.'''

_CONVERSATION_NEW_CITY = '''Congratulations on the move! The first month in a new city is a great \
time to start, because everyone expects you to be new, and asking "I just moved here, what do you \
recommend?" is a perfectly normal opening line. Here are some low-pressure ways to meet \
people, roughly from easiest to most involved:

**1. Become a regular somewhere.** Pick a café, a bakery or a small bar near your home and \
go at the same time a few times a week. After a couple of weeks the staff and the other \
regulars will recognise you, and small talk starts on its own. It costs almost no effort \
and builds the feeling of belonging faster than you would expect.

**2. Join an activity with a built-in focus.** Group classes such as climbing, pottery, \
dance, a language course or a running club are ideal, because the activity gives you \
something to talk about and nobody expects deep conversation. Choose something that \
meets weekly: seeing the same faces repeatedly matters more than meeting many people once.

**3. Volunteer.** Food banks, community gardens, animal shelters and local festivals \
always need help. You work side by side with people who care about the same things, and \
it is easy to say yes to a coffee afterwards.

**4. Use apps designed for this.** Meetup, Bumble BFF and local Facebook or neighbourhood \
groups list board game nights, hiking groups, book clubs and newcomer meetups. Events \
explicitly for new residents are the lowest pressure of all, since everyone there is in \
the same situation as you.

**5. Say yes to small invitations at work.** Lunch with a colleague, after-work drinks \
or a team quiz night. You do not have to stay long; showing up is what counts.

**6. Talk to your neighbours.** Introduce yourself in the stairwell or over the fence. A \
simple "Hi, I just moved into number 4" opens the door to local tips, and neighbours are \
the people you will bump into most often.

A few tips that make it easier:

- **Plan a short exit.** Going to an event for 45 minutes is still a success. Knowing \
you can leave makes it much easier to go.
- **Follow up once.** If you click with someone, suggest something concrete: "I am going \
to the market on Saturday, want to come?" Most friendships need a few meetings before \
they feel natural.
- **Be patient with yourself.** Research on friendship suggests it takes many hours of \
time together before an acquaintance becomes a friend, so a month is about building \
acquaintances, not best friends. That is completely normal.

If you tell me which city you moved to and what you enjoy doing, I can suggest a few \
specific groups or places to start with!'''

_CONVERSATION_SOURDOUGH = '''Good news: your starter is almost certainly not ruined. That \
nail polish remover smell is one of the most common things a starter does, and it is a \
sign that it is **hungry**, not that it has gone bad.

**Why it smells like that**

A starter is a community of wild yeasts and lactic acid bacteria. When they run out of \
fresh flour to eat, they get stressed and start producing other by-products, including \
ethyl acetate and similar compounds, which smell sharp and solvent-like, very much like \
acetone. It often happens when:

- the starter goes too long between feedings;
- your kitchen is warm, so it eats through its food faster;
- the feeding ratio is small, for example equal parts starter, flour and water;
- it has just come out of the fridge after a week or two without feeding.

**How to bring it back**

1. **Discard most of it.** Keep only about a tablespoon (roughly 20 g) of starter.
2. **Feed it generously.** Use a higher ratio, such as 1 part starter to 5 parts flour \
and 5 parts water by weight, for example 20 g starter, 100 g flour and 100 g water. \
More food means it takes longer to run out.
3. **Feed on a schedule.** Do this once or twice a day for two to four days. Use water \
at around 25 °C and keep the jar somewhere comfortably warm, but not hot.
4. **Add some whole grain.** Replacing a small part of the flour with whole wheat or rye \
gives the microbes more nutrients and often speeds up the recovery.
5. **Watch the smell change.** Within a few feedings it should smell pleasantly sour and \
yeasty, a bit like yoghurt or beer, and double in size within 4 to 8 hours of a feeding.

**When to throw it away**

The acetone smell is harmless, but a few signs do mean the starter is spoiled and should \
be discarded, jar washed:

- pink, orange or red streaks or patches;
- fuzzy mould on the surface, in any colour;
- a truly rotten smell, like spoiled meat, rather than a sharp or sour one.

A layer of grey or brownish liquid on top, called hooch, is also harmless. It is just \
alcohol from a hungry starter; you can pour it off or stir it in.

**Keeping it happy from now on**

If you bake only occasionally, store the starter in the fridge and feed it once a week, \
then give it one or two feedings at room temperature before you bake. If you keep it on \
the counter, feed it every 12 to 24 hours, and consider a bigger ratio in summer.

Give it a few days of regular meals and it should be back to full strength. Happy \
baking!'''

_CONVERSATION_LISBON = '''What a lovely way to see Lisbon! The city is made for people \
who like to eat and wander: it is built on hills, full of viewpoints, and some of its \
best experiences are simply a pastry in one hand and a view in front of you. Here is a \
relaxed plan for two days, with plenty of time to sit down.

**Saturday: old Lisbon, slowly**

- **Morning.** Start in Baixa with a coffee and a pastel de nata at any busy pastelaria. \
Walk through the arch on Rua Augusta to the riverside square, Praça do Comércio, and \
follow the river east for a while.
- **Late morning.** Climb gently into Alfama, the oldest neighbourhood, and let yourself \
get a little lost in its stairways and alleys. Stop at the Miradouro de Santa Luzia for \
the view over the red roofs and the river.
- **Lunch.** Look for a small tasca with a handwritten menu. Grilled fish, bacalhau \
dishes and a jug of house wine are the classics, and in summer you will smell sardines \
grilling on the street.
- **Afternoon.** Continue up to Graça and the Miradouro da Senhora do Monte, one of the \
highest viewpoints in the city. It is a good place to sit for an hour.
- **Evening.** Have dinner back in Alfama or Mouraria, and if you like, listen to fado \
in a small restaurant where it is sung between courses.

**Sunday: markets, gardens and the river**

- **Morning.** Take a taxi or tram to Campo de Ourique and browse its neighbourhood \
market, which has food stalls as well as produce. It is much calmer than the big food \
hall downtown.
- **Late morning.** Walk through Estrela and on to Príncipe Real, with its garden, its \
shaded benches and its small shops.
- **Lunch.** Head down to Cais do Sodré and the Time Out Market in the old Mercado da \
Ribeira. It is busy, but it lets you try many famous local cooks in one place. Try a \
bifana, a simple and excellent pork sandwich.
- **Afternoon.** Walk along the river towards Belém, or take the train for part of the \
way. It is flat and pleasant, and in Belém you can try the original custard tarts at \
the famous bakery near the monastery.
- **Evening.** End with a drink at a rooftop or a riverside bar as the sun sets over \
the 25 de Abril bridge.

**A few practical tips**

- Wear shoes with good grip: the polished cobblestones are slippery, especially when wet.
- Tram 28 is charming but always crowded; for getting around, the metro, buses and \
taxis are easier, and walking downhill is always a pleasure.
- Lisbon eats late. Lunch is from around 13:00 and dinner from 20:00, and booking a \
table for Saturday dinner is a good idea.
- Try a glass of ginjinha, the local cherry liqueur, from one of the tiny bars near \
Rossio.

Enjoy your weekend! If you tell me what kind of food you love most, I can suggest a \
few more places that fit.'''

BUILTIN: tuple[tuple[str, str, str, str], ...] = (
    (
        "conversation-1",
        "conversation",
        "I just moved to a new city and don't know anyone yet. What are some low-pressure "
        "ways to meet people in the first month?",
        _CONVERSATION_NEW_CITY,
    ),
    (
        "conversation-2",
        "conversation",
        "My sourdough starter smells a bit like nail polish remover. Is it ruined, or can "
        "I save it?",
        _CONVERSATION_SOURDOUGH,
    ),
    (
        "conversation-3",
        "conversation",
        "Can you help me plan a relaxed weekend in Lisbon for two people who like food and "
        "walking more than museums?",
        _CONVERSATION_LISBON,
    ),
    (
        "reasoning-1",
        "reasoning",
        "A train leaves at 09:40 and travels 312 km at an average of 96 km/h, with a "
        "7-minute stop halfway. Calculate the arrival time step by step.",
        _REASONING_TRAIN,
    ),
    (
        "reasoning-2",
        "reasoning",
        "A shop sells pens in packs of 6 for 4.20 and packs of 10 for 6.50. How many pens "
        "can you buy with exactly 50.00 if you want the most pens? Solve it step by step.",
        _REASONING_PENS,
    ),
    (
        "reasoning-3",
        "reasoning",
        "Three friends split a bill of 187.50. Ana pays 15 more than Ben, and Ben pays "
        "twice what Chen pays. Calculate how much each one pays, step by step.",
        _REASONING_BILL,
    ),
    (
        "prose-1",
        "prose",
        "Write an essay of about a thousand words on why night trains are coming back in "
        "Europe, with a clear argument and concrete examples.",
        _PROSE_NIGHT_TRAINS,
    ),
    (
        "prose-2",
        "prose",
        "Write a short story about a lighthouse keeper who receives a letter addressed to "
        "someone who left the island forty years ago.",
        _PROSE_LIGHTHOUSE,
    ),
    (
        "prose-3",
        "prose",
        "Describe in detail how a small coastal town changes through the four seasons, as "
        "a long-form magazine piece.",
        _PROSE_SEASONS,
    ),
    (
        "code-1",
        "code",
        "Implement a Python function that merges overlapping time intervals, with type "
        "hints, a docstring and a few doctests.",
        _CODE_INTERVALS,
    ),
    (
        "code-2",
        "code",
        "Write a Python class for an LRU cache with get and put in O(1), and explain the "
        "data structures you use.",
        _CODE_LRU,
    ),
    (
        "code-3",
        "code",
        "Here is a bug: my Python function that parses ISO dates fails on inputs with a "
        "trailing Z. Implement a fixed version that handles time zones.",
        _CODE_ISO,
    ),
)
