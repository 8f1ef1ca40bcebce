"""A personal memory as the README's prompt builds it, and questions about it as people ask them.

One user (``default_user``), their family, partner, pets, friends, job and colleagues, two years of
dated events (``happenedOn``, recorded the day they were told unless said otherwise), facts that
change (two moves, a change of job, a new car), and small things beside them that answer nothing.
Dates are counted back from `today`, so that "last spring" or "two weeks ago" name the event they
were written for on any day the benchmark runs.

Two question sets: ``tuning`` (what the ranking's constants may be chosen on) and ``held-out``
(never tuned on: it measures). Each covers the same categories, worded independently; each
question names the observation that answers it (None: the memory never says, the answer should
be empty or one line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

CATEGORIES = ("direct", "paraphrase", "keyword", "person", "temporal", "current", "relation", "absent")


@dataclass(frozen=True)
class Asked:
    category: str
    text: str
    fact: str | None


def season_start(today: date, first_month: int, *, year_back: int = 0) -> date:
    """The start of the latest season beginning in `first_month` that has ended by today."""
    year = today.year
    while True:
        start = date(year, first_month, 1)
        end_month = first_month + 3
        end = date(year + (end_month - 1) // 12, (end_month - 1) % 12 + 1, 1)
        if end <= today:
            break
        year -= 1
    return date(start.year - year_back, start.month, 1)


def month_start(today: date, month: int) -> date:
    """The first day of the latest month `month` (1 to 12) that has ended by today: "in May"."""
    year = today.year
    while date(year + month // 12, month % 12 + 1, 1) > today:
        year -= 1
    return date(year, month, 1)


def entity_records(entities: list[tuple[str, str, list[tuple[str, str | None]]]],
                   fillers: list[tuple[str, str, list[str]]], filler_day: str) -> list[dict[str, Any]]:
    """The entities' records, each observation dated (happenedOn, recorded the day it happened),
    then the small fillers', recorded on `filler_day` with no date of their own."""
    records: list[dict[str, Any]] = []
    for name, kind, facts in entities:
        records.append({"type": "entity", "name": name, "entityType": kind,
                        "observations": [text for text, _ in facts],
                        "createdAt": f"{min(day for _, day in facts if day)}T12:00:00.000Z",
                        "updatedAt": f"{max(day for _, day in facts if day)}T12:00:00.000Z",
                        "recordedAt": [f"{day}T12:00:00.000Z" if day else None for _, day in facts],
                        "happenedOn": [day for _, day in facts]})
    for name, kind, observations in fillers:
        records.append({"type": "entity", "name": name, "entityType": kind, "observations": observations,
                        "createdAt": f"{filler_day}T12:00:00.000Z", "updatedAt": f"{filler_day}T12:00:00.000Z",
                        "recordedAt": [f"{filler_day}T12:00:00.000Z"] * len(observations)})
    return records


Told = tuple[str, str | None]
"""When a fact was recorded, and when it happened (None: a standing fact, no happenedOn)."""


def latest_day(today: date, month: int, day: int, *, year_back: int = 0) -> date:
    """The latest `month`/`day` not after today ("on 17 May"), or the one `year_back` years before."""
    this_year = date(today.year, month, day)
    latest = this_year if this_year <= today else date(today.year - 1, month, day)
    return date(latest.year - year_back, month, day)


def dated_records(entities: list[tuple[str, str, list[tuple[str, Told]]]],
                  fillers: list[tuple[str, str, list[str]]], filler_day: str, *,
                  in_told_order: bool = False) -> list[dict[str, Any]]:
    """The entities' records, each observation recorded the day it was told (`in_told_order`: kept
    in that order), events with the day they happened (happenedOn), standing facts without one;
    then the fillers' (`entity_records`)."""
    records: list[dict[str, Any]] = []
    for name, kind, given in entities:
        facts = sorted(given, key=lambda fact: fact[1][0]) if in_told_order else given
        told = [recorded for _, (recorded, _) in facts]
        records.append({"type": "entity", "name": name, "entityType": kind,
                        "observations": [text for text, _ in facts],
                        "createdAt": f"{min(told)}T12:00:00.000Z", "updatedAt": f"{max(told)}T12:00:00.000Z",
                        "recordedAt": [f"{day}T12:00:00.000Z" for day in told],
                        "happenedOn": [happened for _, (_, happened) in facts]})
    return records + entity_records([], fillers, filler_day)


def relation_records(relations: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    return [{"type": "relation", "from": source, "to": target, "relationType": kind}
            for source, target, kind in relations]


def check_memory(records: list[dict[str, Any]], asked: list[Asked], today: date, *, per_category: int) -> None:
    """That a memory and its questions hold together on `today` (AssertionError naming what does
    not): names, observations, relations and questions once each; relations between entities;
    nothing dated after `today`; `per_category` questions in each category; each answer an
    observation that no other holds (the benchmark looks for its text in the answer), absent
    questions and only they without one."""
    entities = [record for record in records if record["type"] == "entity"]
    relations = [record for record in records if record["type"] == "relation"]
    names = [entity["name"] for entity in entities]
    assert len(names) == len(set(names)), f"duplicate names: {sorted({n for n in names if names.count(n) > 1})}"
    texts = [text for entity in entities for text in entity["observations"]]
    assert len(texts) == len(set(texts)), f"duplicate observations: {sorted({t for t in texts if texts.count(t) > 1})}"
    for entity in entities:
        days = [day for day in entity.get("happenedOn", []) if day]
        days += [stamp[:10] for stamp in entity.get("recordedAt", []) if stamp]
        days += [entity["createdAt"][:10], entity["updatedAt"][:10]]
        for day in days:
            assert date.fromisoformat(day) <= today, f"{entity['name']}: {day} is after {today}"
        assert len(entity.get("recordedAt", entity["observations"])) == len(entity["observations"])
    known = set(names)
    for relation in relations:
        assert relation["from"] in known and relation["to"] in known, f"relation to no entity: {relation}"
    triples = [(r["from"], r["to"], r["relationType"]) for r in relations]
    assert len(triples) == len(set(triples)), "duplicate relations"
    questions = [item.text for item in asked]
    assert len(questions) == len(set(questions)), "duplicate questions"
    facts = [item.fact for item in asked if item.fact is not None]
    assert len(facts) == len(set(facts)), "two questions answered by the same fact"
    assert all(item.category in CATEGORIES for item in asked)
    for category in CATEGORIES:
        count = sum(1 for item in asked if item.category == category)
        assert count == per_category, f"{category}: {count} questions, not {per_category}"
    for item in asked:
        assert (item.fact is None) == (item.category == "absent"), f"absent or not: {item.text!r}"
        if item.fact is None:
            continue
        assert item.fact in texts, f"{item.text!r}: answer {item.fact!r} is no observation"
        holders = [text for text in texts if item.fact in text and text != item.fact]
        assert not holders, f"{item.fact!r} is inside {holders}"


def seasons(today: date) -> tuple[date, date, date, date, date, date, date, date]:
    """The first days of the last winter, spring, summer and autumn (northern) that have ended by
    `today` (season_start), then of each the year before."""
    now = [season_start(today, month) for month in (12, 3, 6, 9)]
    before = [season_start(today, month, year_back=1) for month in (12, 3, 6, 9)]
    return now[0], now[1], now[2], now[3], before[0], before[1], before[2], before[3]


class Chats:
    """The days of chats written for a history ending on `base`, moved to end on `today`: what
    "three weeks ago" was written for stays three weeks before the day the benchmark runs."""

    def __init__(self, today: date, base: date) -> None:
        self.shift = today - base

    def event(self, day: str, told_after: int = 0) -> Told:
        """An event on a day of the chats as written, told that day or `told_after` days later."""
        happened = date.fromisoformat(day) + self.shift
        return (happened + timedelta(days=told_after)).isoformat(), happened.isoformat()

    def standing(self, day: str) -> Told:
        """A standing fact (no happenedOn), told on a day of the chats as written."""
        return (date.fromisoformat(day) + self.shift).isoformat(), None

    @staticmethod
    def on(day: date, told_after: int = 0) -> Told:
        """An event on a day of its own (in a season, on a calendar day), not moved."""
        return (day + timedelta(days=told_after)).isoformat(), day.isoformat()


def month_end(start: date, months: int) -> date:
    """The first day after the `months` whole months from `start` (the first of a month)."""
    end_month = start.month + months
    return date(start.year + (end_month - 1) // 12, (end_month - 1) % 12 + 1, 1)


def check_times(asked: list[Asked], when: dict[str, date], today: date, *, spans: dict[str, tuple[date, int]],
                days: dict[str, Callable[[date], bool]], per_category: int) -> None:
    """That each temporal question's answer is an event (happenedOn, `when`) within the one time
    its question names: a phrase of `spans` (its first day and how many whole months) or of `days`
    (a test of the day: "two weeks ago", "since we moved")."""
    covered = 0
    for item in asked:
        if item.category != "temporal" or item.fact is None:
            continue
        assert item.fact in when, f"{item.text!r}: its answer has no happenedOn"
        day = when[item.fact]
        named = 0
        for phrase, (start, months) in spans.items():
            if phrase in item.text:
                end = month_end(start, months)
                assert start <= day < end <= today, f"{item.text!r}: {day} not in {phrase} ({start} to {end})"
                named += 1
        for phrase, holds in days.items():
            if phrase in item.text:
                assert holds(day), f"{item.text!r}: {day} is not {phrase}"
                named += 1
        assert named == 1, f"{item.text!r}: names {named} spans the check knows"
        covered += 1
    assert covered == per_category


def self_check(name: str, memory: Callable[[date], list[dict[str, Any]]], check: Callable[[date], None],
               asked: list[Asked], extra_days: list[date]) -> None:
    """A memory module's `__main__`: its check on 400 days from today and on `extra_days`, then a
    line of what it holds."""
    first = date.today()
    days = [first + timedelta(days=offset) for offset in range(0, 400)] + extra_days
    for day in days:
        check(day)
    records = memory(first)
    entities = [record for record in records if record["type"] == "entity"]
    user = next(entity for entity in entities if entity["name"] == "default_user")
    print(f"{name}: checked on {len(days)} days; {len(entities)} entities, "
          f"{sum(len(entity['observations']) for entity in entities)} observations "
          f"({len(user['observations'])} on default_user), "
          f"{len(records) - len(entities)} relations, {len(asked)} questions "
          f"({', '.join(f'{c} {sum(1 for q in asked if q.category == c)}' for c in CATEGORIES)})")


def happened(records: list[dict[str, Any]]) -> dict[str, date]:
    """When each observation with a happenedOn happened, by its text."""
    return {text: date.fromisoformat(day) for record in records if record["type"] == "entity"
            for text, day in zip(record["observations"], record.get("happenedOn", [])) if day}


def memory(today: date) -> list[dict[str, Any]]:
    """The memory's records (entities with observation dates, then relations) as of `today`."""
    def ago(days: int) -> str:
        return (today - timedelta(days=days)).isoformat()

    spring = season_start(today, 3) + timedelta(days=45)   # mid-April of the last spring
    summer = season_start(today, 6) + timedelta(days=50)
    winter = season_start(today, 12) + timedelta(days=40)  # January of the last winter
    last_month_first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    last_month = last_month_first + timedelta(days=11)
    entities: list[tuple[str, str, list[tuple[str, str | None]]]] = [
        ("default_user", "person", [
            ("Name is Sam Rivera", ago(700)),
            ("Born in 1990 in San Diego", ago(700)),
            ("Lives in an apartment in Boston's South End", ago(690)),
            ("Moved from Boston to Denver for a new start", ago(420)),
            ("Moved to a house in Boulder with a big garden", ago(160)),
            ("Works as a backend engineer at Acme Robotics", ago(690)),
            ("Started a new job as a staff engineer at Lumen Health", ago(230)),
            ("Drives a grey 2015 Honda Civic", ago(650)),
            ("Sold the Civic and bought a blue Tesla Model 3", ago(110)),
            ("Allergic to penicillin", ago(600)),
            ("Lactose intolerant, takes oat milk in coffee", ago(580)),
            ("Favourite food is Sichuan hot pot", ago(560)),
            ("Plays bass guitar in a community band on Thursdays", ago(500)),
            ("Runs about 20 miles a week", ago(480)),
            ("Ran the Boston half marathon in 1:52", ago(470)),
            ("Reading 'The Overstory' by Richard Powers", ago(90)),
            ("Is learning Portuguese with a tutor twice a week", ago(300)),
            ("Takes vitamin D every morning", ago(260)),
            ("Prefers window seats on flights", ago(640)),
            ("Wants to visit Japan in cherry blossom season", ago(200)),
            ("Is afraid of heights", ago(610)),
            ("Blood type is O negative", ago(590)),
            ("Got a promotion to principal engineer", ago(40)),
            ("Spent a week in Lisbon eating pasteis de nata and riding tram 28", spring.isoformat()),
            ("Went camping at Great Sand Dunes with Jordan", summer.isoformat()),
            ("Went skiing in Steamboat Springs and sprained a wrist", winter.isoformat()),
            ("Had a root canal at the dentist", ago(14)),
            ("Hosted a board game night with friends", last_month.isoformat()),
            ("Adopted a border collie puppy from a shelter", ago(380)),
            ("Broke a toe kicking a table leg", ago(520)),
            ("Switched from iPhone to a Pixel phone", ago(330)),
            ("Bought a standing desk for the home office", ago(150)),
            ("Signed up for a pottery class on Saturdays", ago(60)),
            ("Cancelled the gym membership", ago(120)),
        ]),
        ("Jordan_Lee", "person", [
            ("Partner of Sam since 2019", ago(700)),
            ("Works as a paediatric nurse at Children's Hospital Colorado", ago(400)),
            ("Loves rock climbing and bouldering", ago(690)),
            ("Birthday is on March 3", ago(680)),
            ("Is vegetarian", ago(670)),
            ("Plays the ukulele badly but happily", ago(300)),
        ]),
        ("Maria_Rivera", "person", [
            ("Sam's older sister", ago(700)),
            ("Lives in Austin, Texas", ago(690)),
            ("Works as an architect at Gensler", ago(660)),
            ("Has a tabby cat named Miso", ago(640)),
            ("Ran for city council in 2024 and lost narrowly", ago(380)),
            ("Is training for a triathlon", ago(100)),
            ("Allergic to peanuts", ago(620)),
        ]),
        ("Tom_Rivera", "person", [
            ("Sam's younger brother", ago(700)),
            ("Lives in Portland, Oregon", ago(690)),
            ("Runs a small coffee roastery called Ember Beans", ago(650)),
            ("Collects vinyl records, mostly jazz", ago(600)),
        ]),
        ("Anna_Rivera", "person", [
            ("Teaches high school chemistry", ago(650)),
            ("Grew up in Kraków, Poland", ago(640)),
            ("Makes the best pierogi at family gatherings", ago(500)),
            ("Is expecting a second baby in the spring", ago(70)),
        ]),
        ("Leo_Rivera", "person", [
            ("Tom and Anna's son, born in 2021", ago(650)),
            ("Obsessed with dinosaurs, especially the stegosaurus", ago(300)),
            ("Started kindergarten this year", ago(90)),
        ]),
        ("Helen_Rivera", "person", [
            ("Sam's mother", ago(700)),
            ("Retired librarian living in San Diego", ago(690)),
            ("Had hip replacement surgery", ago(250)),
            ("Grows tomatoes and roses", ago(600)),
        ]),
        ("Richard_Rivera", "person", [
            ("Sam's father", ago(700)),
            ("Former merchant marine officer", ago(690)),
            ("Has type 2 diabetes, manages it with diet", ago(400)),
            ("Builds model ships in bottles", ago(550)),
        ]),
        ("Rosa_Alvarez", "person", [
            ("Sam's grandmother on the mother's side", ago(700)),
            ("Turned 92 and still bakes every Sunday", ago(180)),
            ("Lives in a care home in Tijuana", ago(400)),
        ]),
        ("Biscuit", "dog", [
            ("Border collie, black and white, adopted as a puppy", ago(380)),
            ("Loves chasing frisbees at the park", ago(300)),
            ("Takes carprofen for a sore hip", ago(45)),
            ("Vet is Dr. Alvarez at Foothills Animal Clinic", ago(350)),
            ("Birthday is celebrated on June 10", ago(370)),
        ]),
        ("Miso", "cat", [
            ("Tabby cat, twelve years old", ago(640)),
            ("Sleeps in the laundry basket", ago(500)),
        ]),
        ("Acme_Robotics", "company", [
            ("Warehouse robotics company in Cambridge, Massachusetts", ago(690)),
            ("Sam worked there on the fleet routing service", ago(690)),
            ("Laid off a fifth of its staff", ago(260)),
        ]),
        ("Lumen_Health", "company", [
            ("Health software company in Denver", ago(230)),
            ("Makes scheduling software for clinics", ago(230)),
            ("Offers four-day work weeks in summer", ago(200)),
        ]),
        ("Priya_Nair", "person", [
            ("Sam's manager at Lumen Health", ago(220)),
            ("Former Google engineer", ago(220)),
            ("Runs the weekly architecture review", ago(200)),
            ("Has twin daughters", ago(150)),
        ]),
        ("Platform_Team", "team", [
            ("Owns the API gateway and the job queue", ago(220)),
            ("Has seven engineers", ago(220)),
            ("Is migrating from Kafka to Postgres queues this quarter", ago(50)),
            ("On-call rotation changes every Monday", ago(200)),
        ]),
        ("Dev_Malhotra", "person", [
            ("Colleague of Sam at Lumen Health", ago(210)),
            ("Sits next to Sam and loves terrible puns", ago(210)),
            ("Is getting married in Goa next year", ago(80)),
        ]),
        ("Carlos_Mendes", "person", [
            ("Friend from college, now a chef in Lisbon", ago(680)),
            ("Owns a restaurant called Tasca do Carlos", ago(600)),
            ("Showed Sam around the Alfama district", spring.isoformat()),
        ]),
        ("Yuki_Tanaka", "person", [
            ("Friend from the running club", ago(470)),
            ("Works as a translator of Japanese novels", ago(460)),
            ("Recommended a ryokan in Kyoto", ago(190)),
        ]),
        ("Ben_Okafor", "person", [
            ("Neighbour in Boulder", ago(150)),
            ("Retired schoolteacher who lends out his power tools", ago(150)),
            ("Keeps bees in the back yard", ago(140)),
        ]),
        ("Dr_Patel", "person", [
            ("Sam's family doctor at Boulder Medical Center", ago(150)),
            ("Prescribed a statin for high cholesterol", ago(130)),
        ]),
        ("Dr_Kim", "person", [
            ("Sam's dentist on Pearl Street", ago(150)),
            ("Recommended a night guard for teeth grinding", ago(100)),
        ]),
        ("Thursday_Band", "group", [
            ("Community band that rehearses in a church hall", ago(500)),
            ("Plays mostly funk and soul covers", ago(500)),
            ("Played a gig at the Boulder farmers market", ago(75)),
        ]),
        ("Boulder_House", "home", [
            ("Three bedroom house on Maple Street", ago(160)),
            ("The roof needs replacing within two years", ago(140)),
            ("Has a vegetable garden with raised beds", ago(130)),
        ]),
        ("Tesla_Model_3", "car", [
            ("Blue 2023 Tesla Model 3 long range", ago(110)),
            ("Charges overnight in the garage", ago(105)),
        ]),
        ("Honda_Civic", "car", [
            ("Grey 2015 Honda Civic, bought used", ago(650)),
            ("Needed a new transmission", ago(450)),
        ]),
        ("Portuguese_Lessons", "activity", [
            ("Tutor is called Inês and teaches over video", ago(300)),
            ("Working through the A2 level textbook", ago(120)),
        ]),
        ("Book_Club", "group", [
            ("Meets on the first Tuesday of each month", ago(340)),
            ("Last read 'Klara and the Sun'", ago(35)),
        ]),
    ]
    # Small things that answer none of the questions (people keep such notes too).
    fillers = [
        ("Blue_Bottle_Cafe", "place", ["Coffee shop near the office with good cortados"]),
        ("Farmers_Market", "place", ["Saturday market on 13th Street"]),
        ("Pearl_Street", "place", ["Pedestrian mall in downtown Boulder"]),
        ("Great_Sand_Dunes", "place", ["National park in southern Colorado"]),
        ("Steamboat_Springs", "place", ["Ski town in northern Colorado"]),
        ("Lisbon", "city", ["Capital of Portugal"]),
        ("Denver", "city", ["Capital of Colorado"]),
        ("Boston", "city", ["Capital of Massachusetts"]),
        ("Boulder", "city", ["College town at the foot of the Flatirons"]),
        ("Austin", "city", ["Capital of Texas"]),
        ("Portland", "city", ["City in Oregon known for its bridges"]),
        ("San_Diego", "city", ["Coastal city in southern California"]),
        ("Ember_Beans", "company", ["Coffee roastery in Portland's Pearl District"]),
        ("Gensler", "company", ["Architecture firm"]),
        ("Foothills_Animal_Clinic", "place", ["Veterinary clinic on Arapahoe Road"]),
        ("Boulder_Medical_Center", "place", ["Clinic on Broadway"]),
        ("Children's_Hospital_Colorado", "place", ["Hospital in Aurora"]),
        ("Running_Club", "group", ["Meets Sunday mornings at the reservoir"]),
        ("Pottery_Class", "activity", ["Wheel throwing for beginners at the rec center"]),
        ("The_Overstory", "book", ["Novel about trees by Richard Powers"]),
        ("Klara_and_the_Sun", "book", ["Novel by Kazuo Ishiguro"]),
        ("Kyoto_Ryokan", "place", ["Traditional inn in Kyoto's Higashiyama district"]),
        ("Tasca_do_Carlos", "place", ["Small restaurant in Lisbon's Alfama district"]),
        ("Board_Games", "hobby", ["Favourite games are Wingspan and Azul"]),
        ("Home_Office", "room", ["Spare bedroom facing the garden"]),
        ("Kafka", "technology", ["Message broker the platform team is leaving"]),
        ("Weekly_Architecture_Review", "meeting", ["Wednesday afternoons, one hour"]),
        ("Goa", "place", ["Beach state in western India"]),
        ("Krakow", "city", ["City in southern Poland"]),
        ("Tijuana", "city", ["City in Baja California"]),
        ("Bees", "hobby", ["Two hives of Italian honey bees"]),
        ("Oat_Milk", "food", ["Barista edition, bought by the case"]),
        ("Hot_Pot_Place", "place", ["Little Sichuan restaurant on Colfax"]),
        ("Frisbee", "toy", ["Soft rubber disc, easy on the dog's teeth"]),
        ("Vitamin_D", "supplement", ["2000 IU capsules"]),
        ("Standing_Desk", "furniture", ["Electric, with a bamboo top"]),
        ("Bass_Guitar", "instrument", ["Fender Jazz bass, sunburst"]),
        ("Vinyl_Collection", "collection", ["Tom's records, stored in milk crates"]),
        ("Model_Ships", "hobby", ["Richard's ships in bottles line the hallway"]),
        ("Care_Home", "place", ["Casa del Sol in Tijuana"]),
        ("Pixel_Phone", "device", ["Pixel 8 in hazel"]),
        ("Night_Guard", "device", ["Custom fitted, worn while sleeping"]),
        ("Statin", "medication", ["Atorvastatin 10 mg"]),
        ("Carprofen", "medication", ["Anti-inflammatory for dogs"]),
        ("Penicillin", "medication", ["Antibiotic"]),
        ("Triathlon", "event", ["Sprint distance in Austin in May"]),
        ("City_Council", "organization", ["Austin city council"]),
        ("Dinosaur_Museum", "place", ["Favourite outing for kids in Portland"]),
        ("Tram_28", "transport", ["Historic tram line through Lisbon"]),
        ("Japan_Trip", "plan", ["Idea for a future spring"]),
    ]
    records = entity_records(entities, fillers, ago(300))
    relations = [
        ("default_user", "Jordan_Lee", "partner_of"), ("Maria_Rivera", "default_user", "sister_of"),
        ("Tom_Rivera", "default_user", "brother_of"), ("Tom_Rivera", "Anna_Rivera", "married_to"),
        ("Leo_Rivera", "Tom_Rivera", "son_of"), ("Leo_Rivera", "Anna_Rivera", "son_of"),
        ("Helen_Rivera", "default_user", "mother_of"), ("Richard_Rivera", "default_user", "father_of"),
        ("Helen_Rivera", "Richard_Rivera", "married_to"), ("Rosa_Alvarez", "Helen_Rivera", "mother_of"),
        ("default_user", "Biscuit", "owns"), ("Maria_Rivera", "Miso", "owns"),
        ("default_user", "Acme_Robotics", "worked_at"), ("default_user", "Lumen_Health", "works_at"),
        ("Priya_Nair", "default_user", "manages"), ("Priya_Nair", "Platform_Team", "leads"),
        ("default_user", "Platform_Team", "member_of"), ("Dev_Malhotra", "Platform_Team", "member_of"),
        ("Dev_Malhotra", "default_user", "colleague_of"), ("Priya_Nair", "Lumen_Health", "works_at"),
        ("Carlos_Mendes", "default_user", "friend_of"), ("Yuki_Tanaka", "default_user", "friend_of"),
        ("Ben_Okafor", "default_user", "neighbour_of"), ("default_user", "Dr_Patel", "patient_of"),
        ("default_user", "Dr_Kim", "patient_of"), ("default_user", "Thursday_Band", "member_of"),
        ("default_user", "Boulder_House", "lives_in"), ("default_user", "Tesla_Model_3", "drives"),
        ("default_user", "Honda_Civic", "used_to_drive"), ("default_user", "Portuguese_Lessons", "takes"),
        ("default_user", "Book_Club", "member_of"), ("Jordan_Lee", "Children's_Hospital_Colorado", "works_at"),
        ("Maria_Rivera", "Gensler", "works_at"), ("Tom_Rivera", "Ember_Beans", "owns"),
        ("Carlos_Mendes", "Tasca_do_Carlos", "owns"), ("Rosa_Alvarez", "Care_Home", "lives_in"),
        ("Biscuit", "Foothills_Animal_Clinic", "treated_at"), ("Dr_Patel", "Boulder_Medical_Center", "works_at"),
    ]
    records += relation_records(relations)
    return records


def _q(category: str, text: str, fact: str | None) -> Asked:
    return Asked(category, text, fact)


TUNING = [
    _q("direct", "What am I allergic to?", "Allergic to penicillin"),
    _q("direct", "What instrument do I play in the band?", "Plays bass guitar in a community band on Thursdays"),
    _q("direct", "Where does Tom live?", "Lives in Portland, Oregon"),
    _q("direct", "What is my blood type?", "Blood type is O negative"),
    _q("direct", "What does Anna teach?", "Teaches high school chemistry"),
    _q("direct", "What medication does Biscuit take?", "Takes carprofen for a sore hip"),
    _q("paraphrase", "Can I have milk in my coffee?", "Lactose intolerant, takes oat milk in coffee"),
    _q("paraphrase", "What dish do I like most?", "Favourite food is Sichuan hot pot"),
    _q("paraphrase", "Which language am I studying?", "Is learning Portuguese with a tutor twice a week"),
    _q("paraphrase", "How far do I jog each week?", "Runs about 20 miles a week"),
    _q("paraphrase", "Does Jordan eat meat?", "Is vegetarian"),
    _q("paraphrase", "What does my mom do in her garden?", "Grows tomatoes and roses"),
    _q("keyword", "stegosaurus", "Obsessed with dinosaurs, especially the stegosaurus"),
    _q("keyword", "night guard", "Recommended a night guard for teeth grinding"),
    _q("keyword", "half marathon time", "Ran the Boston half marathon in 1:52"),
    _q("keyword", "transmission", "Needed a new transmission"),
    _q("keyword", "pierogi", "Makes the best pierogi at family gatherings"),
    _q("keyword", "kindergarten", "Started kindergarten this year"),
    _q("person", "What pet does Maria have?", "Has a tabby cat named Miso"),
    _q("person", "Where does Maria work?", "Works as an architect at Gensler"),
    _q("person", "What is Jordan's job?", "Works as a paediatric nurse at Children's Hospital Colorado"),
    _q("person", "What does Priya do at work every week?", "Runs the weekly architecture review"),
    _q("person", "What did my grandmother do on her birthday?", "Turned 92 and still bakes every Sunday"),
    _q("person", "What health problem does my father have?", "Has type 2 diabetes, manages it with diet"),
    _q("temporal", "Where did I travel last spring?", "Spent a week in Lisbon eating pasteis de nata and riding tram 28"),
    _q("temporal", "What did I do at the dentist two weeks ago?", "Had a root canal at the dentist"),
    _q("temporal", "What did I host last month?", "Hosted a board game night with friends"),
    _q("temporal", "Where did we go camping last summer?", "Went camping at Great Sand Dunes with Jordan"),
    _q("temporal", "What happened when I went skiing over the winter?",
       "Went skiing in Steamboat Springs and sprained a wrist"),
    _q("temporal", "What did I sign up for since we moved to Boulder?", "Signed up for a pottery class on Saturdays"),
    _q("current", "Where do I live now?", "Moved to a house in Boulder with a big garden"),
    _q("current", "Where do I currently work?", "Started a new job as a staff engineer at Lumen Health"),
    _q("current", "What car do I drive these days?", "Sold the Civic and bought a blue Tesla Model 3"),
    _q("current", "What is my job title now?", "Got a promotion to principal engineer"),
    _q("current", "What book am I reading at the moment?", "Reading 'The Overstory' by Richard Powers"),
    _q("current", "Which phone do I use now?", "Switched from iPhone to a Pixel phone"),
    _q("relation", "What does my brother's wife teach?", "Teaches high school chemistry"),
    _q("relation", "How big is my manager's team?", "Has seven engineers"),
    _q("relation", "Where does my sister work?", "Works as an architect at Gensler"),
    _q("relation", "Who is my dog's vet?", "Vet is Dr. Alvarez at Foothills Animal Clinic"),
    _q("relation", "What does my partner love doing?", "Loves rock climbing and bouldering"),
    _q("relation", "What is my brother's coffee business called?", "Runs a small coffee roastery called Ember Beans"),
    _q("absent", "What is my favourite opera?", None),
    _q("absent", "Which university did Maria attend?", None),
    _q("absent", "What is the name of my goldfish?", None),
    _q("absent", "When is my wedding anniversary?", None),
    _q("absent", "What is Tom's shoe size?", None),
    _q("absent", "Which political party do I vote for?", None),
]

HELD_OUT = [
    _q("direct", "Which antibiotic can't I take?", "Allergic to penicillin"),
    _q("direct", "Where was I born?", "Born in 1990 in San Diego"),
    _q("direct", "What does Tom collect?", "Collects vinyl records, mostly jazz"),
    _q("direct", "What does Ben keep in his back yard?", "Keeps bees in the back yard"),
    _q("direct", "What did Dr Patel prescribe?", "Prescribed a statin for high cholesterol"),
    _q("direct", "When does the book club meet?", "Meets on the first Tuesday of each month"),
    _q("paraphrase", "Am I scared of being up high?", "Is afraid of heights"),
    _q("paraphrase", "Where do I like to sit on a plane?", "Prefers window seats on flights"),
    _q("paraphrase", "Which supplement do I take daily?", "Takes vitamin D every morning"),
    _q("paraphrase", "Did I quit the gym?", "Cancelled the gym membership"),
    _q("paraphrase", "What hobby does my dad have?", "Builds model ships in bottles"),
    _q("paraphrase", "Where does my kitty-loving sister's cat nap?", "Sleeps in the laundry basket"),
    _q("keyword", "frisbee", "Loves chasing frisbees at the park"),
    _q("keyword", "hip replacement", "Had hip replacement surgery"),
    _q("keyword", "triathlon training", "Is training for a triathlon"),
    _q("keyword", "roof", "The roof needs replacing within two years"),
    _q("keyword", "ukulele", "Plays the ukulele badly but happily"),
    _q("keyword", "Kafka migration", "Is migrating from Kafka to Postgres queues this quarter"),
    _q("person", "What is Dev planning next year?", "Is getting married in Goa next year"),
    _q("person", "Where did Anna grow up?", "Grew up in Kraków, Poland"),
    _q("person", "What did Maria run for?", "Ran for city council in 2024 and lost narrowly"),
    _q("person", "What does Yuki translate?", "Works as a translator of Japanese novels"),
    _q("person", "Where does my grandmother live?", "Lives in a care home in Tijuana"),
    _q("person", "When is Jordan's birthday?", "Birthday is on March 3"),
    _q("temporal", "What city did I visit in the spring?", "Spent a week in Lisbon eating pasteis de nata and riding tram 28"),
    _q("temporal", "Did I go camping this summer?", "Went camping at Great Sand Dunes with Jordan"),
    _q("temporal", "How did I get hurt skiing last winter?", "Went skiing in Steamboat Springs and sprained a wrist"),
    _q("temporal", "What dental work did I have a couple of weeks ago?", "Had a root canal at the dentist"),
    _q("temporal", "What game night did I have last month?", "Hosted a board game night with friends"),
    _q("temporal", "What furniture did I buy since I moved to Boulder?", "Bought a standing desk for the home office"),
    _q("current", "Which city am I living in these days?", "Moved to a house in Boulder with a big garden"),
    _q("current", "Who is my employer now?", "Started a new job as a staff engineer at Lumen Health"),
    _q("current", "What's my current car?", "Sold the Civic and bought a blue Tesla Model 3"),
    _q("current", "What is my latest role at work?", "Got a promotion to principal engineer"),
    _q("current", "What is my book club reading lately?", "Last read 'Klara and the Sun'"),
    _q("current", "Am I still going to the gym?", "Cancelled the gym membership"),
    _q("relation", "What is my nephew obsessed with?", "Obsessed with dinosaurs, especially the stegosaurus"),
    _q("relation", "What is my manager's previous employer?", "Former Google engineer"),
    _q("relation", "What restaurant does my friend in Lisbon own?", "Owns a restaurant called Tasca do Carlos"),
    _q("relation", "What does my neighbour lend out?", "Retired schoolteacher who lends out his power tools"),
    _q("relation", "What is my brother's wife expecting?", "Is expecting a second baby in the spring"),
    _q("relation", "What does my team own?", "Owns the API gateway and the job queue"),
    _q("absent", "What is my cat's name?", None),
    _q("absent", "Which football team does Tom support?", None),
    _q("absent", "What did I name my boat?", None),
    _q("absent", "What is my favourite ballet?", None),
    _q("absent", "Which horse did Jordan ride?", None),
    _q("absent", "What tattoo do I have?", None),
]

SETS = {"tuning": TUNING, "held-out": HELD_OUT}
