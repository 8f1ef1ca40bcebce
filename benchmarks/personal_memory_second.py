"""A second personal memory, of another person and life, with one question set that is never tuned on.

Written independently of the ranking code and of ``personal_memory.py``'s questions, to measure
search_nodes on a memory nobody chose its constants on: never tune on it. It has the same interface
as ``personal_memory.py`` (``CATEGORIES``, ``Asked``, ``memory(today)``, ``SETS``), so the bench
loads it by swapping the module.

One user (``default_user``, Nell Whitaker), as the README's prompt builds a memory: her husband and
two children, her parents and grandfather, an aunt, her brother's family (a niece), her in-laws,
a greyhound and a tortoise, two employers, a manager, a team and a colleague, friends, a GP and a
vet; two years of dated events (``happenedOn``, recorded the day they were told); facts that change
(two moves, a change of employer and a promotion, a new car, a new phone, a changed diet, a sport
given up for another), each version its own observation; and small things beside them that answer
nothing. Kin two relations away (grandfather, aunt, niece, mother- and sister-in-law) are reached
only through relations: their observations name their own kin, not the user. Dates are counted back
from `today`, so that "last summer", "last fall", "over the winter", "two weeks ago", "last month"
and "in May" name the event written for them on any day the benchmark runs.

One question set, ``second``: the same categories as ``personal_memory.py``, six each, written
before being asked of any server; each question names the observation that answers it (None: the
memory never says, the answer should be empty or one line).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from personal_memory import (  # (the shapes are the first memory's: only the life differs)
    CATEGORIES,
    Asked,
    entity_records,
    month_start,
    relation_records,
    season_start,
)

__all__ = ["CATEGORIES", "SETS", "Asked", "memory"]

def memory(today: date) -> list[dict[str, Any]]:
    """The memory's records (entities with observation dates, then relations) as of `today`."""
    def ago(days: int) -> str:
        return (today - timedelta(days=days)).isoformat()

    summer = season_start(today, 6) + timedelta(days=50)   # late July of the last summer
    autumn = season_start(today, 9) + timedelta(days=50)   # October half-term of the last autumn
    winter = season_start(today, 12) + timedelta(days=40)  # January of the last winter
    in_may = month_start(today, 5) + timedelta(days=16)    # the latest May
    last_month_first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    last_month = last_month_first + timedelta(days=11)
    entities: list[tuple[str, str, list[tuple[str, str | None]]]] = [
        ("default_user", "person", [
            ("Name is Eleanor Whitaker, goes by Nell", ago(720)),
            ("Born in 1986 in Norwich", ago(720)),
            # Home: a flat in Manchester, then Leeds, then a cottage in Hebden Bridge.
            ("Lives in a rented flat in Manchester's Northern Quarter", ago(715)),
            ("Moved to a terraced house in Headingley, Leeds", ago(480)),
            ("Bought a stone cottage in Hebden Bridge and moved in", ago(140)),
            # Work: Brightwater, then Kestrel Games, then a promotion there.
            ("Works as a UX designer at Brightwater Insurance", ago(715)),
            ("Left Brightwater and joined Kestrel Games as a senior product designer", ago(400)),
            ("Promoted to design lead at Kestrel Games", ago(35)),
            ("Works from home on Mondays and Fridays", ago(380)),
            # Car, phone, diet, sport: each changed once.
            ("Drives a red 2012 Ford Fiesta", ago(700)),
            ("Part-exchanged the Fiesta for a second-hand Volvo V60 estate", ago(200)),
            ("Uses an iPhone 11 with a cracked screen", ago(650)),
            ("Upgraded to an iPhone 15", ago(90)),
            ("Has been pescatarian for ten years", ago(690)),
            ("Went fully vegan", ago(150)),
            ("Plays goal defence in a Sunday netball league", ago(700)),
            ("Gave up netball after tearing a knee ligament", ago(450)),
            ("Took up road cycling on a gravel bike", ago(300)),
            # Health, tastes, habits, wishes.
            ("Coeliac, has to avoid gluten", ago(680)),
            ("Gets migraines when she skips meals", ago(620)),
            ("Favourite film is Paddington 2", ago(610)),
            ("Hates coriander, thinks it tastes like soap", ago(600)),
            ("Is scared of wasps", ago(590)),
            ("Wears glasses for driving", ago(560)),
            ("Has a National Trust membership", ago(540)),
            ("Adopted a retired greyhound from the Greyhound Trust", ago(420)),
            ("Wants to walk the Camino de Santiago someday", ago(330)),
            ("Is learning to knit and is halfway through a first jumper", ago(250)),
            ("Sings alto in a community choir on Wednesday evenings", ago(130)),
            ("Reading 'Tomorrow, and Tomorrow, and Tomorrow' by Gabrielle Zevin", ago(60)),
            # Events, dated for the temporal questions.
            ("Went to Hannah's hen weekend in Dublin", in_may.isoformat()),
            ("Spent a fortnight on the Isle of Skye at Moira's B&B", summer.isoformat()),
            ("Spent October half-term in a cabin in the Lake District", autumn.isoformat()),
            ("Slipped on black ice and cracked a rib", winter.isoformat()),
            ("Hosted a curry night for the choir at the cottage", last_month.isoformat()),
            ("Passed the theory test for a motorbike licence", ago(14)),
        ]),
        ("Callum_Reid", "person", [
            ("Nell's husband, married in 2015 in Whitby", ago(720)),
            ("Grew up in Portree on the Isle of Skye", ago(710)),
            ("Works as a carpenter making bespoke oak furniture", ago(700)),
            ("Allergic to cats", ago(650)),
            ("Plays the fiddle at ceilidhs", ago(500)),
            ("Goes wild swimming at Gaddings Dam all year round", ago(130)),
        ]),
        ("Isla_Reid", "person", [
            ("Nell and Callum's daughter, born in 2017", ago(720)),
            ("Has a nut allergy and carries an EpiPen", ago(650)),
            ("Wants to be a vet when she grows up", ago(300)),
            ("Plays the violin in the school orchestra", ago(200)),
        ]),
        ("Finn_Reid", "person", [
            ("Nell and Callum's son, born in 2021", ago(720)),
            ("Mad about steam trains, especially the Flying Scotsman", ago(300)),
            ("Goes to Little Acorns nursery three days a week", ago(130)),
        ]),
        ("Judith_Whitaker", "person", [
            ("Nell's mother", ago(720)),
            ("Retired midwife living in Norwich", ago(710)),
            ("Does the crossword in the paper every morning", ago(600)),
            ("Had cataract surgery on both eyes", ago(280)),
        ]),
        ("Graham_Whitaker", "person", [
            ("Nell's father", ago(720)),
            ("Former bus driver in Norwich", ago(710)),
            ("Grows prize leeks on his allotment", ago(600)),
            ("Goes birdwatching at Cley Marshes", ago(500)),
            ("Had a pacemaker fitted", ago(300)),
        ]),
        ("Arthur_Whitaker", "person", [
            ("Graham's father", ago(720)),
            ("Former crab fisherman in Cromer", ago(700)),
            ("Still plays dominoes at the Red Lion on Fridays", ago(500)),
            ("Lives in sheltered housing in Cromer", ago(400)),
        ]),
        ("Pauline_Marsh", "person", [
            ("Judith's younger sister", ago(690)),
            ("Lives in Alicante, Spain", ago(680)),
            ("Runs a small yoga studio by the beach", ago(600)),
            ("Sends everyone turrón at Christmas", ago(400)),
        ]),
        ("Simon_Whitaker", "person", [
            ("Nell's older brother", ago(720)),
            ("Lives in Bristol", ago(710)),
            ("Works as an air traffic controller at Bristol Airport", ago(700)),
            ("Brews his own cider in the garage", ago(450)),
            ("Did the Three Peaks Challenge for charity", ago(250)),
        ]),
        ("Leila_Whitaker", "person", [
            ("Simon's wife", ago(700)),
            ("Works as a radio producer at BBC Bristol", ago(690)),
            ("Grew up in Beirut", ago(680)),
            ("Makes amazing baklava", ago(500)),
        ]),
        ("Poppy_Whitaker", "person", [
            ("Simon and Leila's daughter, born in 2014", ago(700)),
            ("Horse-mad, has riding lessons every Saturday", ago(400)),
            ("Got a distinction in her Grade 5 piano exam", ago(120)),
        ]),
        ("Moira_Reid", "person", [
            ("Callum's mother", ago(710)),
            ("Runs a bed and breakfast in Portree", ago(700)),
            ("Speaks Gaelic at home", ago(690)),
            ("Knits Fair Isle jumpers", ago(600)),
            ("Teaches Nell knitting over video calls", ago(250)),
        ]),
        ("Kirsty_Reid", "person", [
            ("Callum's younger sister", ago(700)),
            ("Works as a sommelier in Edinburgh", ago(690)),
            ("Moved from Glasgow to Edinburgh", ago(500)),
            ("Has climbed 140 of the Munros", ago(300)),
        ]),
        ("Juniper", "dog", [
            ("Brindle greyhound, retired from racing at four", ago(420)),
            ("Raced under the name Swift Juniper Rose", ago(420)),
            ("Is scared of the hoover", ago(350)),
            ("Wears a fleece coat in winter because she gets cold", ago(300)),
        ]),
        ("Gordon", "tortoise", [
            ("Hermann's tortoise, about fifty years old", ago(400)),
            ("Came from Grandad Arthur when he moved into sheltered housing", ago(400)),
            ("Hibernates in a box in the fridge from November to March", ago(300)),
            ("Loves eating dandelions", ago(250)),
        ]),
        ("Brightwater_Insurance", "company", [
            ("Insurance company in Manchester", ago(715)),
            ("Nell redesigned its claims app", ago(700)),
            ("Was taken over by a French insurer", ago(300)),
        ]),
        ("Kestrel_Games", "company", [
            ("Independent games studio in Leeds", ago(400)),
            ("Best known for the cosy farming game Hollowmere", ago(400)),
            ("Lets staff bring dogs to the office on Fridays", ago(390)),
            ("Is opening a second studio in Dundee", ago(45)),
        ]),
        ("Owen_Price", "person", [
            ("Nell's manager at Kestrel Games", ago(400)),
            ("Creative director, originally from Swansea", ago(400)),
            ("Plays competitive darts in a pub league", ago(300)),
            ("Has just become a grandfather", ago(60)),
        ]),
        ("Hollowmere_Team", "team", [
            ("Working on the sequel to Hollowmere", ago(400)),
            ("Has twelve people across art, design and code", ago(380)),
            ("Does a show-and-tell every Friday afternoon", ago(350)),
            ("Aims to ship the sequel next spring", ago(60)),
        ]),
        ("Fatima_Rahman", "person", [
            ("Lead artist on the Hollowmere team", ago(395)),
            ("Sits opposite Nell and draws cartoons of everyone", ago(390)),
            ("Is going on maternity leave soon", ago(40)),
        ]),
        ("Hannah_Cole", "person", [
            ("Friend from university in Sheffield", ago(720)),
            ("Works as a barrister in London", ago(710)),
            ("Is Isla's godmother", ago(700)),
            ("Getting married to Zara in a barn in Somerset", ago(300)),
        ]),
        ("Marcus_Bello", "person", [
            ("Friend from the choir", ago(120)),
            ("Sings tenor and never learns the words", ago(120)),
            ("Runs a vegan bakery called Crumb in Todmorden", ago(115)),
            ("Bakes gluten-free bread specially for Nell", ago(100)),
        ]),
        ("Dr_Adeyemi", "person", [
            ("Nell's GP at Hebden Bridge Health Centre", ago(135)),
            ("Referred Nell to a neurologist for the migraines", ago(100)),
        ]),
        ("Fiona_Mackay", "person", [
            ("Vet at Calder Valley Vets", ago(130)),
            ("Checks Gordon over before and after hibernation", ago(120)),
            ("Removed a harmless lump from Juniper's leg", ago(80)),
        ]),
        ("Valley_Voices", "group", [
            ("Community choir of about forty singers", ago(130)),
            ("Rehearses at the Methodist chapel in Hebden Bridge", ago(130)),
            ("Came second in a choir competition in Halifax", ago(100)),
        ]),
        ("Hebden_Bridge_Cottage", "home", [
            ("Two-bedroom stone cottage on a steep lane above the canal", ago(140)),
            ("Has a wood-burning stove in the front room", ago(135)),
            ("The cellar needs damp-proofing", ago(110)),
        ]),
        ("Volvo_V60", "car", [
            ("Grey 2017 Volvo V60 diesel estate", ago(200)),
            ("Has a dog guard in the boot for Juniper", ago(195)),
        ]),
        ("Ford_Fiesta", "car", [
            ("Red 2012 Ford Fiesta, failed its MOT twice", ago(600)),
        ]),
    ]
    # Small things that answer none of the questions (people keep such notes too).
    fillers = [
        ("Hebden_Bridge", "town", ["Mill town in the Calder Valley, West Yorkshire"]),
        ("Leeds", "city", ["Largest city in West Yorkshire"]),
        ("Manchester", "city", ["City in north-west England"]),
        ("Northern_Quarter", "place", ["Bohemian district of central Manchester"]),
        ("Headingley", "place", ["Leeds suburb known for its cricket ground"]),
        ("Norwich", "city", ["Cathedral city in Norfolk"]),
        ("Cromer", "town", ["Seaside town on the north Norfolk coast"]),
        ("Bristol", "city", ["City on the River Avon"]),
        ("Bristol_Airport", "place", ["Airport south of the city at Lulsgate"]),
        ("BBC_Bristol", "organization", ["Broadcasting house on Whiteladies Road"]),
        ("Alicante", "city", ["Port city on the Costa Blanca"]),
        ("Edinburgh", "city", ["Capital of Scotland"]),
        ("Portree", "town", ["Main town on Skye, with a painted harbour"]),
        ("Isle_of_Skye", "place", ["Largest island of the Inner Hebrides"]),
        ("Lake_District", "place", ["National park in Cumbria"]),
        ("Dundee", "city", ["City on the Firth of Tay"]),
        ("Dublin", "city", ["Capital of Ireland"]),
        ("Halifax", "town", ["Town in Calderdale with the Piece Hall"]),
        ("Whitby", "town", ["Fishing town on the North Yorkshire coast"]),
        ("Gaddings_Dam", "place", ["Reservoir on the moors above Todmorden"]),
        ("Todmorden", "town", ["Town at the head of the Calder Valley"]),
        ("Cley_Marshes", "place", ["Nature reserve on the Norfolk coast"]),
        ("Crumb_Bakery", "company", ["Small shop on Todmorden's market street"]),
        ("Reid_Joinery", "company", ["Workshop in a converted mill unit"]),
        ("Riverside_Primary", "school", ["Primary school by the canal"]),
        ("Little_Acorns_Nursery", "place", ["Nursery on Market Street"]),
        ("Hebden_Bridge_Health_Centre", "place", ["Surgery on Hangingroyd Lane"]),
        ("Calder_Valley_Vets", "place", ["Veterinary practice in Mytholmroyd"]),
        ("Methodist_Chapel", "place", ["Victorian chapel on Heptonstall Road"]),
        ("Red_Lion", "place", ["Pub near Cromer pier"]),
        ("Trades_Club", "place", ["Music venue in Hebden Bridge"]),
        ("Hollowmere", "game", ["Game set on a misty lake where you grow herbs"]),
        ("Greyhound_Trust", "organization", ["Charity rehoming retired racing dogs"]),
        ("National_Trust", "organization", ["Charity looking after historic houses and gardens"]),
        ("Camino_de_Santiago", "place", ["Pilgrim routes to Santiago de Compostela"]),
        ("Paddington_2", "film", ["2017 film about a bear in London"]),
        ("Tomorrow_and_Tomorrow_and_Tomorrow", "book", ["Novel by Gabrielle Zevin about two game designers"]),
        ("Gravel_Bike", "thing", ["Steel-framed bike, olive green"]),
        ("iPhone_15", "device", ["Blue, 128 GB"]),
        ("Knitting_Project", "thing", ["Chunky jumper in mustard wool"]),
        ("Wood_Burning_Stove", "thing", ["Clearview stove, burns kiln-dried logs"]),
        ("Flying_Scotsman", "locomotive", ["Steam locomotive built in 1923"]),
        ("Dominoes", "game", ["Double-six sets kept behind the bar"]),
        ("Baklava", "food", ["Pistachio and rosewater pastry"]),
        ("Fleece_Coat", "thing", ["Navy, bought at a charity shop"]),
        ("Cider_Press", "thing", ["Wooden press for apples from the garden"]),
        ("Darts", "thing", ["Tungsten 22 gram darts"]),
        ("Theory_Test_Centre", "place", ["Test centre on Wellington Street in Leeds"]),
    ]
    records = entity_records(entities, fillers, ago(300))
    relations = [
        # Family: husband and children, parents and grandfather, aunt, brother's family, in-laws.
        ("default_user", "Callum_Reid", "married_to"),
        ("default_user", "Isla_Reid", "parent_of"), ("default_user", "Finn_Reid", "parent_of"),
        ("Isla_Reid", "Callum_Reid", "child_of"), ("Finn_Reid", "Callum_Reid", "child_of"),
        ("default_user", "Judith_Whitaker", "daughter_of"), ("default_user", "Graham_Whitaker", "daughter_of"),
        ("Graham_Whitaker", "Judith_Whitaker", "husband_of"), ("Arthur_Whitaker", "Graham_Whitaker", "father_of"),
        ("Pauline_Marsh", "Judith_Whitaker", "sister_of"), ("Simon_Whitaker", "default_user", "sibling_of"),
        ("Simon_Whitaker", "Leila_Whitaker", "married_to"),
        ("Poppy_Whitaker", "Simon_Whitaker", "daughter_of"), ("Poppy_Whitaker", "Leila_Whitaker", "daughter_of"),
        ("Moira_Reid", "Callum_Reid", "parent_of"), ("Kirsty_Reid", "Callum_Reid", "sister_of"),
        # Pets.
        ("default_user", "Juniper", "has_pet"), ("default_user", "Gordon", "has_pet"),
        ("Arthur_Whitaker", "Gordon", "previously_owned"),
        ("Fiona_Mackay", "Juniper", "treats"), ("Fiona_Mackay", "Gordon", "treats"),
        # Work.
        ("default_user", "Brightwater_Insurance", "formerly_worked_for"),
        ("default_user", "Kestrel_Games", "employed_by"), ("default_user", "Owen_Price", "reports_to"),
        ("Owen_Price", "Kestrel_Games", "works_for"), ("Owen_Price", "Hollowmere_Team", "heads"),
        ("default_user", "Hollowmere_Team", "part_of"), ("Fatima_Rahman", "Hollowmere_Team", "part_of"),
        ("Fatima_Rahman", "default_user", "works_with"),
        # Friends, choir, doctor.
        ("default_user", "Hannah_Cole", "friends_with"), ("default_user", "Marcus_Bello", "friends_with"),
        ("Hannah_Cole", "Isla_Reid", "godmother_of"),
        ("default_user", "Valley_Voices", "sings_in"), ("Marcus_Bello", "Valley_Voices", "member_of"),
        ("default_user", "Dr_Adeyemi", "registered_with"),
        # Home, cars, and where the others live, work and go.
        ("default_user", "Hebden_Bridge_Cottage", "lives_in"),
        ("default_user", "Volvo_V60", "owns"), ("default_user", "Ford_Fiesta", "used_to_own"),
        ("Callum_Reid", "Reid_Joinery", "runs"), ("Simon_Whitaker", "Bristol_Airport", "works_at"),
        ("Leila_Whitaker", "BBC_Bristol", "works_for"), ("Marcus_Bello", "Crumb_Bakery", "owns"),
        ("Kirsty_Reid", "Edinburgh", "lives_in"), ("Arthur_Whitaker", "Cromer", "lives_in"),
        ("Isla_Reid", "Riverside_Primary", "attends"), ("Finn_Reid", "Little_Acorns_Nursery", "attends"),
    ]
    records += relation_records(relations)
    return records


def _q(category: str, text: str, fact: str | None) -> Asked:
    return Asked(category, text, fact)


SECOND = [
    # direct: shares its key words with the fact.
    _q("direct", "Do I have coeliac disease?", "Coeliac, has to avoid gluten"),
    _q("direct", "What part do I sing in the choir?", "Sings alto in a community choir on Wednesday evenings"),
    _q("direct", "Why is Gordon in the fridge?", "Hibernates in a box in the fridge from November to March"),
    _q("direct", "What is my favourite film?", "Favourite film is Paddington 2"),
    _q("direct", "What can staff bring to the office at Kestrel Games on Fridays?",
       "Lets staff bring dogs to the office on Fridays"),
    _q("direct", "Where does the choir rehearse?", "Rehearses at the Methodist chapel in Hebden Bridge"),
    # paraphrase: the meaning only, none of the fact's key words.
    _q("paraphrase", "What gives me bad headaches?", "Gets migraines when she skips meals"),
    _q("paraphrase", "Which insects frighten me?", "Is scared of wasps"),
    _q("paraphrase", "Do I need specs behind the wheel?", "Wears glasses for driving"),
    _q("paraphrase", "Which pilgrimage across Spain is on my bucket list?",
       "Wants to walk the Camino de Santiago someday"),
    _q("paraphrase", "Does Callum take dips outdoors when it's freezing?",
       "Goes wild swimming at Gaddings Dam all year round"),
    _q("paraphrase", "Why does Juniper need a jacket?", "Wears a fleece coat in winter because she gets cold"),
    # keyword: a bare word or short phrase.
    _q("keyword", "coriander", "Hates coriander, thinks it tastes like soap"),
    _q("keyword", "pacemaker", "Had a pacemaker fitted"),
    _q("keyword", "Flying Scotsman", "Mad about steam trains, especially the Flying Scotsman"),
    _q("keyword", "Fair Isle", "Knits Fair Isle jumpers"),
    _q("keyword", "damp cellar", "The cellar needs damp-proofing"),
    _q("keyword", "EpiPen", "Has a nut allergy and carries an EpiPen"),
    # person: names another person, or a kin word for one.
    _q("person", "What does Leila do for a living?", "Works as a radio producer at BBC Bristol"),
    _q("person", "What instrument does Isla play?", "Plays the violin in the school orchestra"),
    _q("person", "What's Hannah's job?", "Works as a barrister in London"),
    _q("person", "What does my grandfather do on Fridays?", "Still plays dominoes at the Red Lion on Fridays"),
    _q("person", "Where does my aunt live?", "Lives in Alicante, Spain"),
    _q("person", "What did Dr Adeyemi do about my migraines?", "Referred Nell to a neurologist for the migraines"),
    # temporal: a season, a relative date, a month.
    _q("temporal", "Where did we go on holiday last summer?", "Spent a fortnight on the Isle of Skye at Moira's B&B"),
    _q("temporal", "Where did we take the children last fall?",
       "Spent October half-term in a cabin in the Lake District"),
    _q("temporal", "How did I get hurt over the winter?", "Slipped on black ice and cracked a rib"),
    _q("temporal", "Which test did I pass two weeks ago?", "Passed the theory test for a motorbike licence"),
    _q("temporal", "Who did I have round for dinner last month?", "Hosted a curry night for the choir at the cottage"),
    _q("temporal", "Where did I go in May?", "Went to Hannah's hen weekend in Dublin"),
    # current: the newest version of a fact that changed.
    _q("current", "Where's home for me these days?", "Bought a stone cottage in Hebden Bridge and moved in"),
    _q("current", "Who is my employer at the moment?",
       "Left Brightwater and joined Kestrel Games as a senior product designer"),
    _q("current", "What car am I driving now?", "Part-exchanged the Fiesta for a second-hand Volvo V60 estate"),
    _q("current", "What's my current job title?", "Promoted to design lead at Kestrel Games"),
    _q("current", "Do I still eat fish?", "Went fully vegan"),
    _q("current", "What sport do I do these days?", "Took up road cycling on a gravel bike"),
    # relation: through one or two relations.
    _q("relation", "What does my husband do for a living?", "Works as a carpenter making bespoke oak furniture"),
    _q("relation", "What does my niece do on Saturdays?", "Horse-mad, has riding lessons every Saturday"),
    _q("relation", "What's my manager's hobby?", "Plays competitive darts in a pub league"),
    _q("relation", "What does my husband's mum do for work?", "Runs a bed and breakfast in Portree"),
    _q("relation", "What job does my husband's sister have?", "Works as a sommelier in Edinburgh"),
    _q("relation", "Where is the company I work for opening a new studio?", "Is opening a second studio in Dundee"),
    # absent: never said, though near what is.
    _q("absent", "What is my rabbit called?", None),
    _q("absent", "Which rugby team does Callum support?", None),
    _q("absent", "What grade did Isla get in ballet?", None),
    _q("absent", "Which wine do I like best?", None),
    _q("absent", "What is Finn allergic to?", None),
    _q("absent", "Which motorbike did I buy?", None),
]

SETS = {"second": SECOND}
