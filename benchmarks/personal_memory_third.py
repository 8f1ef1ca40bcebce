"""A third personal memory, of another person and another life, and one question set about it.

Written independently of the ranking code and of the other two memories, to measure the ranking
on a memory it was never tuned on: never choose a constant on this set. Its questions were written
before any server answered them.

The user (``default_user``) is Aino, a retired hospital pharmacist in Tampere, Finland: divorced from
the father of her two grown children and remarried to a widower with a son of his own, a grandson
and a new granddaughter, a twin sister in Stockholm with a daughter at university, an elderly mother
and an aunt in Lapland, a dog and a shelter cat, volunteering that changed, a committee she chairs,
friends, a neighbour she teaches, a doctor, a physiotherapist and a vet. Two years of dated events
(``happenedOn``, recorded the day they were told), facts that change (two moves, retirement and a
change of volunteering, a new car, a new phone, a new diet, a new hobby in place of an old one),
and small things beside them that answer nothing. Dates are counted back from `today`, so that
"last autumn", "three weeks ago" or "in November" name the event they were written for on any
day the benchmark runs, and no date is ever in the future.

One question set, ``third``, in the same categories as the others; each question names the
observation that answers it (None: the memory never says, the answer should be empty or one line).
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

    def on(day: date, plus: int = 0) -> str:
        return (day + timedelta(days=plus)).isoformat()

    spring = season_start(today, 3) + timedelta(days=45)   # mid-April of the last spring
    summer = season_start(today, 6) + timedelta(days=50)   # late July of the last summer
    autumn = season_start(today, 9) + timedelta(days=40)   # mid-October of the last autumn
    winter = season_start(today, 12) + timedelta(days=40)  # January of the last winter
    november = month_start(today, 11) + timedelta(days=13)  # the latest November that has ended
    last_month_first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    last_month = last_month_first + timedelta(days=11)
    entities: list[tuple[str, str, list[tuple[str, str | None]]]] = [
        ("default_user", "person", [
            ("Name is Aino Lehtinen", ago(720)),
            ("Born in 1959 in Tampere", ago(720)),
            ("Father Veikko died in 2015 of a stroke", ago(715)),
            ("Worked for 31 years as a hospital pharmacist at Tampere University Hospital", ago(710)),
            ("Lives in a fourth-floor flat in Hervanta, Tampere", ago(705)),
            ("Drives a red 2009 Volvo V70 estate", ago(690)),
            ("Uses an old Nokia phone with buttons", ago(680)),
            ("Sings alto in the Tampere Cathedral choir", ago(650)),
            ("Goes to the sauna every Saturday evening", ago(640)),
            ("Favourite food is Karelian pies with egg butter", ago(630)),
            ("Allergic to wasp stings, carries an EpiPen", ago(620)),
            ("Hates flying and takes the train whenever she can", ago(610)),
            ("Takes levothyroxine for an underactive thyroid", ago(600)),
            ("Follows a low-salt diet for high blood pressure", ago(560)),
            ("Knits woollen socks for the whole family", ago(540)),
            ("Moved into a terraced house in Kangasala to be near Sanna's family", ago(445)),
            ("Retired from the hospital pharmacy with a farewell coffee on the ward", ago(430)),
            ("Volunteers at the Red Cross charity shop on Tuesdays", ago(395)),
            ("Adopted a grey cat called Pulla from the Tampere animal shelter", ago(330)),
            ("Wants to see the northern lights from a glass igloo in Lapland", ago(300)),
            ("Got a Samsung smartphone from Eero and is learning to use WhatsApp", ago(265)),
            ("Switched to a mostly plant-based diet on the doctor's advice", ago(235)),
            ("Sold the Volvo and bought a used silver Toyota Yaris hybrid", ago(205)),
            ("Left the choir and took up watercolour painting", ago(175)),
            ("Stopped volunteering at the charity shop and now guides tours at the Vapriikki museum", ago(150)),
            ("Moved to a ground-floor flat in Pispala because the stairs were too hard on the knee", ago(125)),
            ("Was elected chair of the Pispala allotment association", ago(100)),
            ("Teaches Finnish to her neighbour Farida on Thursday afternoons", ago(90)),
            ("Reading Tove Jansson's 'The Summer Book' in Swedish", ago(70)),
            ("Lost her wedding ring in the allotment and found it again with a borrowed metal detector", ago(50)),
            ("Took the overnight ferry from Turku to Stockholm to visit Kaarina", on(spring)),
            ("Went cloudberry picking near Rovaniemi with aunt Lempi", on(summer)),
            ("Had a left knee replacement at Coxa hospital", on(autumn)),
            ("Became a grandmother again when Sanna had baby Aada", on(november)),
            ("Tried ice swimming for the first time at Rauhaniemi beach", on(winter)),
            ("Heard the Sibelius violin concerto at Tampere Hall with Matti", on(last_month)),
            ("Had cataract surgery on the right eye", ago(21)),
        ]),
        ("Matti_Lehtinen", "person", [
            ("Married Aino in 2004 at Kangasala church", ago(715)),
            ("Widowed in 2001 when his first wife Anneli died", ago(700)),
            ("Retired bus driver for Tampere city transport", ago(700)),
            ("Plays the accordion at dances in the village hall", ago(650)),
            ("Supports Ilves in the ice hockey league", ago(600)),
            ("Has a pacemaker for an irregular heartbeat", ago(480)),
        ]),
        ("Pekka_Virtanen", "person", [
            ("Aino's ex-husband, divorced in 1998", ago(710)),
            ("Lives in Oulu with his second wife Tuula", ago(700)),
            ("Runs a hardware shop in the centre of Oulu", ago(690)),
            ("Still sends a card every Christmas", ago(400)),
        ]),
        ("Sanna_Niemi", "person", [
            ("Aino's daughter, born in 1985", ago(715)),
            ("Works as a civil engineer who designs bridges", ago(700)),
            ("Lives in Kangasala with Ville and the children", ago(690)),
            ("Plays floorball on Wednesday nights", ago(500)),
            ("On parental leave with baby Aada", on(november, 3)),
        ]),
        ("Eero_Virtanen", "person", [
            ("Aino's son, born in 1988", ago(715)),
            ("Lives in Berlin and works as a sound engineer for a theatre", ago(700)),
            ("Comes home for midsummer every year", ago(640)),
            ("Got engaged to his boyfriend Lukas", ago(280)),
        ]),
        ("Juho_Lehtinen", "person", [
            ("Matti's son from his first marriage", ago(700)),
            ("Makes mobile games at a small studio in Turku", ago(690)),
            ("Is colour-blind and lets his girlfriend pick his clothes", ago(520)),
            ("Bakes sourdough bread and posts photos of it online", ago(300)),
        ]),
        ("Ville_Niemi", "person", [
            ("Sanna's husband, grew up in Kuopio", ago(700)),
            ("Works as an air traffic controller at Tampere-Pirkkala airport", ago(690)),
            ("Goes pike fishing on Lake Längelmävesi", ago(450)),
        ]),
        ("Onni_Niemi", "person", [
            ("Sanna and Ville's son, born in 2016", ago(715)),
            ("Goes to Vatiala primary school in Kangasala", ago(400)),
            ("Plays junior ice hockey as a goalie", ago(350)),
            ("Wants to be a volcanologist when he grows up", ago(120)),
        ]),
        ("Aada_Niemi", "person", [
            ("Sanna and Ville's baby daughter", on(november)),
            ("Has a full head of dark hair", on(november, 10)),
        ]),
        ("Kaarina_Berg", "person", [
            ("Aino's twin sister, twenty minutes younger", ago(715)),
            ("Lives in Stockholm, married to a Swede called Lars", ago(710)),
            ("Retired customs officer at the port of Stockholm", ago(700)),
            ("Had breast cancer treatment and is now in remission", ago(380)),
        ]),
        ("Elsa_Berg", "person", [
            ("Kaarina and Lars's daughter", ago(700)),
            ("Studies medicine at Uppsala University", ago(690)),
            ("Plays the cello in the student orchestra", ago(450)),
        ]),
        ("Helmi_Korhonen", "person", [
            ("Aino's mother, born in 1934", ago(715)),
            ("Still lives in the old family farmhouse in Sastamala", ago(710)),
            ("Weaves rag rugs on an old loom", ago(650)),
            ("Is nearly deaf and wears hearing aids", ago(600)),
            ("Gets a home care visit twice a day", ago(420)),
        ]),
        ("Lempi_Aikio", "person", [
            ("Helmi's younger sister", ago(700)),
            ("Lives in a village near Rovaniemi", ago(700)),
            ("Herded reindeer with her late husband for forty years", ago(650)),
            ("Still skis to the village shop in winter", ago(600)),
        ]),
        ("Routa", "dog", [
            ("Finnish Lapphund, black with tan markings", ago(700)),
            ("Hides in the bathtub during thunderstorms", ago(560)),
            ("Eats prescription kidney diet food", ago(200)),
            ("Had a tooth pulled at the vet", ago(60)),
        ]),
        ("Pulla", "cat", [
            ("Grey shelter cat, about four years old", ago(330)),
            ("Sleeps on the shelf above the radiator", ago(300)),
            ("Steals yarn from the knitting basket", ago(250)),
        ]),
        ("Red_Cross_Shop", "organization", [
            ("Second-hand shop on Hämeenkatu run by volunteers", ago(395)),
            ("Aino sorted donated clothes there", ago(390)),
        ]),
        ("Vapriikki_Museum", "organization", [
            ("Museum centre in an old factory by the Tammerkoski rapids", ago(150)),
            ("Closed to visitors on Mondays", ago(150)),
            ("Houses the Finnish Ice Hockey Hall of Fame", ago(145)),
            ("Aino leads the Friday tours in Finnish and Swedish", ago(140)),
        ]),
        ("Leena_Makela", "person", [
            ("Volunteer coordinator at the Vapriikki museum", ago(150)),
            ("Former history teacher", ago(150)),
            ("Sends the tour rota every Sunday evening", ago(140)),
            ("Keeps six hens in her back garden", ago(90)),
        ]),
        ("Pispala_Allotment_Association", "organization", [
            ("Has 42 plots on the ridge above Lake Pyhäjärvi", ago(100)),
            ("Holds a seedling swap every May", ago(95)),
            ("Yearly plot fee is 35 euros", ago(95)),
            ("Members argue every year about the shared compost", ago(80)),
        ]),
        ("Pispala_Flat", "home", [
            ("Ground-floor two-room flat with a view of the lake", ago(125)),
            ("Has its own small electric sauna", ago(125)),
            ("Balcony has room for tomato pots", ago(110)),
        ]),
        ("Volvo_V70", "car", [
            ("Red 2009 Volvo V70 estate", ago(690)),
            ("Failed the yearly inspection because of rust", ago(240)),
        ]),
        ("Toyota_Yaris", "car", [
            ("Silver 2018 Toyota Yaris hybrid, bought used", ago(205)),
            ("Gets winter tyres fitted every October", ago(190)),
        ]),
        ("Riitta_Salo", "person", [
            ("Friend from the choir, sings soprano", ago(650)),
            ("Walks with Aino around the Pyynikki ridge on Sundays", ago(500)),
            ("Bakes the best cinnamon buns in Pispala", ago(300)),
        ]),
        ("Farida_Rahimi", "person", [
            ("Came to Finland from Kabul in 2022", ago(95)),
            ("Is training to become a practical nurse", ago(90)),
            ("Has three boys who play football in the courtyard", ago(85)),
            ("Cooked kabuli pulao for the whole building at Eid", ago(40)),
        ]),
        ("Marjatta_Koski", "person", [
            ("Worked beside Aino in the hospital pharmacy for twenty years", ago(690)),
            ("Still works part-time at the pharmacy", ago(500)),
            ("Goes on the Tallinn cruise every spring", ago(350)),
        ]),
        ("Dr_Heikkinen", "person", [
            ("Family doctor at the Tahmela health centre", ago(600)),
            ("Checks Aino's thyroid levels every six months", ago(580)),
            ("Found high cholesterol in the last blood test", ago(240)),
        ]),
        ("Kristian_Lind", "person", [
            ("Physiotherapist at the Coxa rehabilitation unit", on(autumn, 14)),
            ("Gave Aino knee exercises with a resistance band twice a day", on(autumn, 20)),
            ("Says Nordic walking poles are better than a walking stick", on(autumn, 45)),
        ]),
        ("Dr_Saarinen", "person", [
            ("Vet at the Kangasala animal clinic", ago(500)),
            ("Put Routa on a kidney diet after a blood test", ago(200)),
        ]),
    ]
    # Small things that answer none of the questions (people keep such notes too).
    fillers = [
        ("Tampere", "city", ["Finland's third largest city, between two lakes"]),
        ("Hervanta", "place", ["Suburb of Tampere built in the 1970s"]),
        ("Kangasala", "town", ["Town east of Tampere"]),
        ("Pispala", "place", ["Old workers' district on the ridge between two lakes"]),
        ("Sastamala", "town", ["Rural town west of Tampere"]),
        ("Rovaniemi", "city", ["Capital of Lapland on the Arctic Circle"]),
        ("Lapland", "region", ["Northernmost region of Finland"]),
        ("Stockholm", "city", ["Capital of Sweden"]),
        ("Uppsala", "city", ["University city north of Stockholm"]),
        ("Berlin", "city", ["Capital of Germany"]),
        ("Turku", "city", ["Former capital of Finland on the south-west coast"]),
        ("Oulu", "city", ["City on the Gulf of Bothnia"]),
        ("Kuopio", "city", ["City in the lake district of eastern Finland"]),
        ("Tampere_Hall", "place", ["Concert and congress hall near the university"]),
        ("Rauhaniemi_Beach", "place", ["Public sauna and swimming spot on Lake Näsijärvi"]),
        ("Pyynikki_Ridge", "place", ["Esker with an observation tower and a doughnut café"]),
        ("Lake_Pyhajarvi", "place", ["Large lake south of Tampere"]),
        ("Tammerkoski", "place", ["Rapids running through the centre of Tampere"]),
        ("Hameenkatu", "place", ["Main street of Tampere"]),
        ("Coxa_Hospital", "place", ["Joint replacement hospital in Tampere"]),
        ("Tampere_University_Hospital", "place", ["Large teaching hospital in Kauppi"]),
        ("Tampere_Pirkkala_Airport", "place", ["Small airport south-west of Tampere"]),
        ("Vatiala_School", "place", ["Primary school with about 300 pupils"]),
        ("Kangasala_Animal_Clinic", "place", ["Vet clinic next to the shopping centre"]),
        ("Tahmela_Health_Centre", "place", ["Public health centre by the lake"]),
        ("Tampere_Animal_Shelter", "place", ["Shelter for cats and dogs in Lahdesjärvi"]),
        ("Tampere_Cathedral_Choir", "group", ["Parish choir that rehearses on Monday evenings"]),
        ("Uppsala_University", "organization", ["Oldest university in Sweden"]),
        ("Viking_Grace", "ship", ["Ferry between Turku and Stockholm by way of the Åland islands"]),
        ("Kangasala_House", "home", ["Terraced house with a steep staircase"]),
        ("Hervanta_Flat", "home", ["Fourth-floor flat with a lift that often broke"]),
        ("Samsung_Phone", "device", ["Galaxy A54 in a flowery case"]),
        ("Nokia_Phone", "device", ["Nokia 3310 kept in a kitchen drawer"]),
        ("Watercolour_Set", "thing", ["Travel box of twelve pans with a folding brush"]),
        ("Karelian_Pies", "food", ["Rye crust pasties filled with rice porridge"]),
        ("Cloudberries", "food", ["Orange Arctic berries that ripen in the bogs"]),
        ("Accordion", "instrument", ["Five-row button accordion from the 1960s"]),
        ("Floorball", "sport", ["Indoor hockey with a light plastic ball"]),
        ("Hearing_Aids", "device", ["Behind-the-ear, replaced every five years"]),
        ("Glass_Igloo", "place", ["Heated glass cabins near Saariselkä"]),
        ("The_Summer_Book", "book", ["Novel by Tove Jansson about a girl and her grandmother on an island"]),
        ("Ilves", "team", ["Ice hockey club from Tampere"]),
        ("Game_Studio", "company", ["Twelve-person studio in Turku's old harbour"]),
        ("Hardware_Shop", "company", ["Family hardware shop with a key-cutting counter"]),
        ("Levothyroxine", "medication", ["Thyroid hormone tablet, 75 micrograms"]),
        ("Kidney_Diet", "food", ["Prescription dog food, low in phosphorus"]),
        ("Sibelius", "composer", ["Finnish composer of Finlandia"]),
    ]
    records = entity_records(entities, fillers, ago(300))
    relations = [
        ("default_user", "Matti_Lehtinen", "married_to"), ("default_user", "Pekka_Virtanen", "divorced_from"),
        ("default_user", "Sanna_Niemi", "is_parent_of"), ("default_user", "Eero_Virtanen", "is_parent_of"),
        ("Pekka_Virtanen", "Sanna_Niemi", "father_of"), ("Pekka_Virtanen", "Eero_Virtanen", "father_of"),
        ("Matti_Lehtinen", "Juho_Lehtinen", "father_of"), ("default_user", "Juho_Lehtinen", "stepmother_of"),
        ("Matti_Lehtinen", "Sanna_Niemi", "stepfather_of"), ("Matti_Lehtinen", "Eero_Virtanen", "stepfather_of"),
        ("Sanna_Niemi", "Ville_Niemi", "married_to"), ("Sanna_Niemi", "Onni_Niemi", "mother_of"),
        ("Ville_Niemi", "Onni_Niemi", "father_of"), ("Sanna_Niemi", "Aada_Niemi", "mother_of"),
        ("default_user", "Onni_Niemi", "grandmother_of"), ("default_user", "Aada_Niemi", "grandmother_of"),
        ("Kaarina_Berg", "default_user", "twin_sister_of"), ("Kaarina_Berg", "Elsa_Berg", "mother_of"),
        ("Helmi_Korhonen", "default_user", "mother_of"), ("Helmi_Korhonen", "Kaarina_Berg", "mother_of"),
        ("Lempi_Aikio", "Helmi_Korhonen", "sister_of"), ("Lempi_Aikio", "default_user", "aunt_of"),
        ("default_user", "Routa", "owns"), ("default_user", "Pulla", "adopted"),
        ("Routa", "Dr_Saarinen", "patient_of"), ("default_user", "Dr_Heikkinen", "patient_of"),
        ("Kristian_Lind", "default_user", "treats"), ("default_user", "Vapriikki_Museum", "volunteers_at"),
        ("default_user", "Red_Cross_Shop", "used_to_volunteer_at"),
        ("Leena_Makela", "Vapriikki_Museum", "coordinates_volunteers_at"),
        ("default_user", "Pispala_Allotment_Association", "chairs"),
        ("default_user", "Tampere_University_Hospital", "retired_from"),
        ("default_user", "Pispala_Flat", "lives_at"), ("default_user", "Toyota_Yaris", "drives"),
        ("Riitta_Salo", "default_user", "friend_of"), ("Farida_Rahimi", "default_user", "neighbor_of"),
        ("default_user", "Farida_Rahimi", "teaches"), ("Marjatta_Koski", "default_user", "former_colleague_of"),
        ("Ville_Niemi", "Tampere_Pirkkala_Airport", "works_at"), ("Onni_Niemi", "Vatiala_School", "attends"),
        ("Elsa_Berg", "Uppsala_University", "studies_at"), ("Eero_Virtanen", "Berlin", "lives_in"),
    ]
    records += relation_records(relations)
    return records


def _q(category: str, text: str, fact: str | None) -> Asked:
    return Asked(category, text, fact)


THIRD = [
    _q("direct", "Am I allergic to anything?", "Allergic to wasp stings, carries an EpiPen"),
    _q("direct", "What medicine do I take for my thyroid?", "Takes levothyroxine for an underactive thyroid"),
    _q("direct", "What is my favourite food?", "Favourite food is Karelian pies with egg butter"),
    _q("direct", "How often do I go to the sauna?", "Goes to the sauna every Saturday evening"),
    _q("direct", "What instrument does Matti play?", "Plays the accordion at dances in the village hall"),
    _q("direct", "What does Juho bake?", "Bakes sourdough bread and posts photos of it online"),
    _q("paraphrase", "Do I mind getting on a plane?", "Hates flying and takes the train whenever she can"),
    _q("paraphrase", "What do I make for my relatives with needles?", "Knits woollen socks for the whole family"),
    _q("paraphrase", "What's on my bucket list?", "Wants to see the northern lights from a glass igloo in Lapland"),
    _q("paraphrase", "What did I do for a living for three decades?",
       "Worked for 31 years as a hospital pharmacist at Tampere University Hospital"),
    _q("paraphrase", "How did my dad pass away?", "Father Veikko died in 2015 of a stroke"),
    _q("paraphrase", "Which pet did I bring home from the rescue centre?",
       "Adopted a grey cat called Pulla from the Tampere animal shelter"),
    _q("keyword", "metal detector",
       "Lost her wedding ring in the allotment and found it again with a borrowed metal detector"),
    _q("keyword", "volcanologist", "Wants to be a volcanologist when he grows up"),
    _q("keyword", "pacemaker", "Has a pacemaker for an irregular heartbeat"),
    _q("keyword", "rag rugs", "Weaves rag rugs on an old loom"),
    _q("keyword", "reindeer herding", "Herded reindeer with her late husband for forty years"),
    _q("keyword", "cello", "Plays the cello in the student orchestra"),
    _q("person", "Where does Pekka live?", "Lives in Oulu with his second wife Tuula"),
    _q("person", "What does Ville do in his free time?", "Goes pike fishing on Lake Längelmävesi"),
    _q("person", "What is Riitta known for baking?", "Bakes the best cinnamon buns in Pispala"),
    _q("person", "What is Farida training to be?", "Is training to become a practical nurse"),
    _q("person", "What exercises did my physio give me?", "Gave Aino knee exercises with a resistance band twice a day"),
    _q("person", "How is my twin sister's health?", "Had breast cancer treatment and is now in remission"),
    _q("temporal", "Who did I go to see last spring?", "Took the overnight ferry from Turku to Stockholm to visit Kaarina"),
    _q("temporal", "What operation did I have last autumn?", "Had a left knee replacement at Coxa hospital"),
    _q("temporal", "What brave thing did I do over the winter?", "Tried ice swimming for the first time at Rauhaniemi beach"),
    _q("temporal", "What procedure did I have three weeks ago?", "Had cataract surgery on the right eye"),
    _q("temporal", "Which concert did I go to last month?", "Heard the Sibelius violin concerto at Tampere Hall with Matti"),
    _q("temporal", "Which grandchild arrived in November?", "Became a grandmother again when Sanna had baby Aada"),
    _q("current", "Where do I live now?",
       "Moved to a ground-floor flat in Pispala because the stairs were too hard on the knee"),
    _q("current", "What car do I have now?", "Sold the Volvo and bought a used silver Toyota Yaris hybrid"),
    _q("current", "What kind of phone do I use these days?",
       "Got a Samsung smartphone from Eero and is learning to use WhatsApp"),
    _q("current", "What diet am I following at the moment?", "Switched to a mostly plant-based diet on the doctor's advice"),
    _q("current", "Am I still singing in the choir?", "Left the choir and took up watercolour painting"),
    _q("current", "Where do I volunteer these days?",
       "Stopped volunteering at the charity shop and now guides tours at the Vapriikki museum"),
    _q("relation", "What does my daughter's husband do for work?",
       "Works as an air traffic controller at Tampere-Pirkkala airport"),
    _q("relation", "Which school does my grandson go to?", "Goes to Vatiala primary school in Kangasala"),
    _q("relation", "On which day is the place I volunteer at shut?", "Closed to visitors on Mondays"),
    _q("relation", "What is my twin sister's daughter studying?", "Studies medicine at Uppsala University"),
    _q("relation", "What does my husband's son do for a living?", "Makes mobile games at a small studio in Turku"),
    _q("relation", "What yearly event does the garden association I chair hold?", "Holds a seedling swap every May"),
    _q("absent", "What is Routa's favourite toy?", None),
    _q("absent", "Which hospital was Aada born in?", None),
    _q("absent", "Which football team do Farida's boys support?", None),
    _q("absent", "What am I growing on my allotment plot?", None),
    _q("absent", "How much did I pay for the Yaris?", None),
    _q("absent", "Which university did Eero go to?", None),
]

SETS = {"third": THIRD}
