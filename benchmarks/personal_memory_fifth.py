"""A fifth personal memory, written apart from the ranking code, and its questions (set ``fifth``).

Kwame Asante, self-employed in Accra, Ghana: co-owner with his business partner Yaw of SunTrail
Energy, a small solar installation business (a crew of installers, a bookkeeper, clients, a
supplier in Lagos). Engaged, then married to Efua, a maths teacher; their baby daughter was born
last month. Parents and a late grandmother in Kumasi, a brother and his family there, a sister
who moved to Manchester with hers, in-laws in Elmina, a university friend and that friend's
friend in Lomé, a neighbour, a dog and its vet, a doctor, a cycling club, a library he volunteers
at. Two years of dated events counted back from `today` (``happenedOn``, recorded the day they
were told), seasons in the north as the project documents them, one event in a named year
(2025, kept no later than `today`), and facts that change (a move, a motorbike replaced by a
pickup, a new phone, a drink given up, football replaced by cycling, the workshop moved, the
engagement become a marriage, the sister's job abroad), beside small things that answer nothing.

The questions (8 per category, ``CATEGORIES`` of personal_memory.py) were written before any
ranking answered them, without reading the ranking code: each names the observation that answers
it, or None when the memory never says (four on topics never mentioned, four near-misses about
people or things it holds). ``python benchmarks/personal_memory_fifth.py`` checks the memory and
the questions over a year of days.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from personal_memory import CATEGORIES, Asked, check_memory, entity_records, happened, relation_records, season_start

__all__ = ["CATEGORIES", "SETS", "Asked", "check", "memory"]


def month_day(today: date, month: int, day: int) -> date:
    """A day in the latest month `month` not after today ("in March"), never after today."""
    year = today.year if today.month >= month else today.year - 1
    if (year, month) == (today.year, today.month):
        day = min(day, today.day)
    return date(year, month, day)


def memory(today: date) -> list[dict[str, Any]]:
    """The memory's records (entities with observation dates, then relations) as of `today`."""
    def ago(days: int) -> str:
        return (today - timedelta(days=days)).isoformat()

    spring = (season_start(today, 3) + timedelta(days=40)).isoformat()   # about April 10 of the last spring
    summer = (season_start(today, 6) + timedelta(days=55)).isoformat()   # late July of the last summer
    autumn = (season_start(today, 9) + timedelta(days=44)).isoformat()   # mid-October of the last autumn
    christmas = (season_start(today, 12) + timedelta(days=24)).isoformat()  # December 25 of the last winter
    last_month_first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    born = (last_month_first + timedelta(days=2)).isoformat()
    outdooring = (last_month_first + timedelta(days=9)).isoformat()     # the baby's eighth day
    march = month_day(today, 3, 18).isoformat()
    kakum = min(date(2025, 5, 17), today).isoformat()                  # "in 2025"
    entities: list[tuple[str, str, list[tuple[str, str | None]]]] = [
        ("default_user", "person", [
            ("Name is Kwame Asante", ago(720)),
            ("Born in 1991 in Kumasi", ago(720)),
            ("Studied electrical engineering at KNUST", ago(715)),
            ("Co-founded SunTrail Energy, a solar installation business, with Yaw Boateng", ago(710)),
            ("Rents a two-room flat in Madina", ago(705)),
            ("Moved with Efua into a rented house in East Legon", ago(300)),
            ("Rides a Honda motorbike to client sites", ago(690)),
            ("Bought a used Toyota Hilux pickup to carry panels and ladders", ago(210)),
            ("Uses a Tecno Camon phone", ago(680)),
            ("Upgraded to a Samsung Galaxy A55", ago(95)),
            ("Drinks two bottles of Malta Guinness a day", ago(660)),
            ("Stopped drinking Malta and fizzy drinks after the prediabetes warning", ago(248)),
            ("Plays five-a-side football with the Madina Old Boys on Saturdays", ago(670)),
            ("Quit football after twisting a knee and took up road cycling", ago(330)),
            ("Engaged to Efua Mensah", ago(650)),
            ("Married Efua in a traditional ceremony in Cape Coast", ago(430)),
            ("Allergic to shellfish, especially prawns", ago(640)),
            ("Wears glasses for short-sightedness", ago(630)),
            ("Speaks Twi, Fante and English", ago(620)),
            ("Learning French at the Alliance Française on Tuesday evenings", ago(280)),
            ("Favourite dish is waakye with shito and fried plantain", ago(600)),
            ("Listens to highlife, especially old Amakye Dede songs", ago(560)),
            ("Prefers voice notes to phone calls", ago(540)),
            ("Supports Asante Kotoko", ago(610)),
            ("Gets up at 5 am to beat the Accra traffic", ago(500)),
            ("Hates the taste of okra stew", ago(520)),
            ("Volunteers on Saturdays teaching teenagers to code at the Madina Community Library", ago(500)),
            ("Had his wallet stolen at Kaneshie Market", ago(470)),
            ("Hopes to open a SunTrail branch in Lomé within three years", ago(180)),
            ("Saving up for a plot of land in Oyarifa", ago(150)),
            ("Renewed his driving licence at the DVLA", ago(120)),
            ("Reading 'The Beautyful Ones Are Not Yet Born' by Ayi Kwei Armah", ago(40)),
            ("Took Efua to Kakum National Park to walk the canopy walkway", kakum),
            ("Installed a 40-panel system at a senior high school in Ho, the biggest job yet", spring),
            ("Went to a solar trade fair in Lagos and met a lithium battery supplier", summer),
            ("Caught malaria and was in bed for a week", autumn),
            ("Spent Christmas at his parents' house in Kumasi", christmas),
            ("Passed the Energy Commission solar installer licence exam", march),
            ("Became a father when daughter Adjoa was born", born),
            ("Held the outdooring of baby Adjoa on her eighth day", outdooring),
            ("Got a speeding ticket on the Tema motorway", ago(14)),
        ]),
        ("Efua_Mensah", "person", [
            ("Met Kwame at a friend's wedding in Takoradi", ago(650)),
            ("Grew up in Elmina near the castle", ago(650)),
            ("Teaches mathematics at Achimota School", ago(640)),
            ("Sings alto in the Calvary Methodist choir", ago(600)),
            ("Birthday is on 14 August", ago(590)),
            ("Does not eat pork", ago(580)),
            ("Sells homemade shea butter creams on Instagram as a side business", ago(400)),
            ("On maternity leave from Achimota", last_month_first.isoformat()),
        ]),
        ("Adjoa_Asante", "person", [
            ("Kwame and Efua's first child", born),
            ("Weighed 3.2 kg at birth", born),
            ("Named after Kwame's grandmother", outdooring),
        ]),
        ("Kofi_Asante", "person", [
            ("Kwame's younger brother", ago(700)),
            ("Lives in Kumasi and drives a trotro between Kejetia and Ejisu", ago(690)),
            ("Keeps rabbits behind his house", ago(500)),
            ("Plans to buy his own trotro next year", ago(120)),
        ]),
        ("Abena_Asante", "person", [
            ("Owns a tailoring shop in Adum that sews kente-trimmed dresses", ago(650)),
            ("Learned dressmaking from her aunt in Techiman", ago(600)),
            ("Made Efua's wedding kaba and slit", ago(440)),
        ]),
        ("Kwadwo_Asante", "person", [
            ("Kofi and Abena's son, born in 2018", ago(650)),
            ("Wants to be a goalkeeper for the Black Stars", ago(300)),
            ("Started Primary 3 at Ejisu Methodist", ago(90)),
        ]),
        ("Akosua_Lartey", "person", [
            ("Kwame's older sister", ago(700)),
            ("Works as a nurse at Korle Bu Teaching Hospital", ago(690)),
            ("Moved to Manchester to work as a nurse at the Royal Infirmary", ago(260)),
            ("Video calls the family every Sunday evening", ago(240)),
            ("Misses kelewele more than anything in England", ago(200)),
        ]),
        ("Nii_Lartey", "person", [
            ("Works as a customs officer at Kotoka Airport", ago(680)),
            ("Is a Ga from Jamestown and a fierce Hearts of Oak fan", ago(600)),
            ("Joined Akosua in Manchester and drives for a parcel delivery firm", ago(150)),
        ]),
        ("Esi_Lartey", "person", [
            ("Akosua and Nii's daughter, ten years old", ago(650)),
            ("Wants to be a doctor when she grows up", ago(400)),
            ("Picked up a northern English accent at her new school", ago(100)),
        ]),
        ("Kwaku_Asante", "person", [
            ("Kwame's father", ago(720)),
            ("Retired cocoa buyer for the Cocoa Board", ago(700)),
            ("Plays draughts under the mango tree every afternoon", ago(550)),
            ("Had cataract surgery on his left eye", ago(210)),
        ]),
        ("Afua_Asante", "person", [
            ("Kwame's mother", ago(720)),
            ("Retired midwife", ago(700)),
            ("Makes the best palm nut soup in the family", ago(560)),
            ("Has high blood pressure and takes amlodipine", ago(350)),
            ("Came down to Accra to help with the new baby", (last_month_first + timedelta(days=5)).isoformat()),
        ]),
        ("Adjoa_Boakye", "person", [
            ("Kwame's late grandmother on his mother's side", ago(700)),
            ("Was a kente weaver in Bonwire", ago(700)),
        ]),
        ("Kwesi_Mensah", "person", [
            ("Efua's father", ago(650)),
            ("Owns two fishing canoes in Elmina", ago(640)),
            ("Gave Kwame a long talk about responsibility before the marriage", ago(450)),
        ]),
        ("Ekua_Mensah", "person", [
            ("Sells smoked fish at Elmina market", ago(640)),
            ("Is a deaconess at her church", ago(600)),
        ]),
        ("Kobina_Mensah", "person", [
            ("Efua's younger brother", ago(640)),
            ("Studies medicine at the University of Cape Coast", ago(600)),
        ]),
        ("SunTrail_Energy", "company", [
            ("Solar installation business co-owned by Kwame and Yaw", ago(710)),
            ("Installs rooftop panels and battery backups for homes, shops and clinics", ago(700)),
            ("Workshop in a container yard in Madina", ago(700)),
            ("Moved its workshop to a bigger warehouse on Spintex Road", ago(190)),
            ("Gets most customers through WhatsApp referrals", ago(450)),
            ("Turned over about 900,000 cedis last year", ago(200)),
        ]),
        ("Yaw_Boateng", "person", [
            ("Kwame's business partner and co-founder of SunTrail", ago(710)),
            ("Handles the installations side and leads the crew", ago(700)),
            ("Former electrician at the Volta River Authority", ago(690)),
            ("Loves watching Formula 1 on Sunday afternoons", ago(300)),
            ("Got engaged to a nurse from Tamale", ago(70)),
        ]),
        ("SunTrail_Install_Crew", "team", [
            ("Six installers and two apprentices", ago(190)),
            ("Works on roofs from 7 am to 3 pm to avoid the afternoon heat", ago(400)),
            ("Each installer holds a working-at-height certificate", ago(350)),
        ]),
        ("Emmanuel_Tetteh", "person", [
            ("Lead installer at SunTrail", ago(600)),
            ("Can wire a full home system in a single day", ago(500)),
            ("Has three children and a farm in Akuapem", ago(400)),
        ]),
        ("Fatima_Issah", "person", [
            ("Keeps SunTrail's books two days a week", ago(500)),
            ("Is studying for the ICAG accountancy exams", ago(300)),
            ("From Tamale, speaks Dagbani", ago(500)),
        ]),
        ("Kwabena_Owusu", "person", [
            ("Joined SunTrail as an apprentice from Accra Technical University", ago(180)),
            ("Was afraid of ladders at first, now climbs without thinking", ago(60)),
        ]),
        ("Agnes_Quaye", "person", [
            ("Owns Lighthouse Pharmacy in Dansoman", ago(420)),
            ("Ordered a battery backup so her vaccine fridge never goes off", ago(410)),
            ("Paid in three instalments", ago(380)),
        ]),
        ("Volta_Star_Senior_High_School", "organization", [
            ("Boarding school in Ho with 1,200 students", spring),
            ("Paid for its panels with a grant from the old students' association", spring),
        ]),
        ("Palm_Court_Guesthouse", "organization", [
            ("Guesthouse in Osu that asked for a quote for 60 panels", ago(20)),
        ]),
        ("Chidi_Okeke", "person", [
            ("Sells lithium batteries from a warehouse in Ikeja", summer),
            ("Gives SunTrail 30 days to pay", ago(100)),
        ]),
        ("Kojo_Darko", "person", [
            ("Friend from KNUST, studied electrical engineering together", ago(700)),
            ("Works as a flight operations engineer at Zipline Ghana", ago(650)),
            ("Lives in Tema Community 25", ago(500)),
            ("Was best man at Kwame's wedding", ago(430)),
        ]),
        ("Zipline_Ghana", "company", [
            ("Delivers blood and medicines to rural clinics by drone", ago(650)),
        ]),
        ("Selorm_Agbodza", "person", [
            ("Kojo's friend from Lomé", ago(170)),
            ("Distributes solar batteries and inverters across Togo", ago(170)),
            ("Offered to find SunTrail its first customers in Lomé", ago(160)),
        ]),
        ("Nana_Yeboah", "person", [
            ("Neighbour in East Legon", ago(290)),
            ("Retired diplomat who served in Brazil", ago(280)),
            ("Grows hot peppers and gives them away", ago(200)),
        ]),
        ("Ebo_Quansah", "person", [
            ("Met Kwame at the Accra Cycling Club", ago(320)),
            ("Organises the Sunday ride to Aburi", ago(300)),
            ("Fixes bicycles at a roadside stall in Lapaz", ago(300)),
        ]),
        ("Simba", "dog", [
            ("Mixed-breed dog adopted from a street litter in Madina", ago(650)),
            ("Guards the house and barks at every okada", ago(500)),
            ("Eats rice and fish with kibble mixed in", ago(400)),
            ("Had a tick fever scare and recovered", ago(160)),
        ]),
        ("Dr_Nana_Ofori", "person", [
            ("Simba's vet", ago(640)),
            ("Vet at Labone Veterinary Clinic", ago(640)),
            ("Recommends a tick collar for the rainy season", ago(150)),
        ]),
        ("Labone_Veterinary_Clinic", "place", [
            ("Small vet clinic near the Labone roundabout", ago(640)),
            ("Opens on Saturdays until 2 pm", ago(640)),
        ]),
        ("Dr_Ama_Serwaa", "person", [
            ("Kwame's doctor at Nyaho Medical Centre", ago(400)),
            ("Warned Kwame his fasting blood sugar was in the prediabetes range", ago(252)),
            ("Wants a blood sugar test every six months", ago(250)),
        ]),
        ("Accra_Cycling_Club", "group", [
            ("Rides from Labadi to Aburi and back on Sunday mornings", ago(320)),
            ("About forty members, most of them in their thirties", ago(300)),
            ("Charges 200 cedis a year in dues", ago(290)),
        ]),
        ("Road_Bike", "bicycle", [
            ("Second-hand aluminium Giant road bike bought from a club member", ago(325)),
            ("Got new tyres after a puncture on the Aburi hill", ago(45)),
        ]),
        ("Toyota_Hilux", "car", [
            ("Silver 2012 Toyota Hilux double cabin", ago(210)),
            ("Has a roof rack made by a welder in Abossey Okai", ago(200)),
        ]),
        ("Honda_Motorbike", "motorbike", [
            ("Red Honda motorbike, 125 cc", ago(690)),
            ("Sold to a cousin in Nkawkaw after the Hilux came", ago(205)),
        ]),
        ("East_Legon_House", "home", [
            ("Three-bedroom rented house with a mango tree in the yard", ago(300)),
            ("Rent is paid two years upfront, as landlords in Accra expect", ago(300)),
            ("Has a polytank on a stand because the water is irregular", ago(280)),
        ]),
        ("Madina_Flat", "home", [
            ("Two-room flat above a provisions shop", ago(705)),
        ]),
        ("Madina_Community_Library", "place", [
            ("Has twelve donated laptops for the Saturday coding club", ago(480)),
        ]),
        ("Calvary_Methodist_Church", "organization", [
            ("Church in Adabraka the couple attends", ago(600)),
            ("The choir practises on Thursday evenings", ago(590)),
        ]),
        ("French_Lessons", "activity", [
            ("Evening A1 class at the Alliance Française", ago(270)),
            ("Teacher is Madame Kossiwa from Lomé", ago(270)),
        ]),
    ]
    # Small things that answer none of the questions.
    fillers = [
        ("Accra", "city", ["Capital of Ghana on the Gulf of Guinea"]),
        ("Kumasi", "city", ["Capital of the Ashanti Region"]),
        ("Cape_Coast", "city", ["Town known for its castle and fishing harbour"]),
        ("Elmina", "town", ["Fishing town west of Cape Coast"]),
        ("Madina", "place", ["Busy suburb north of Accra"]),
        ("East_Legon", "place", ["Residential area near the University of Ghana"]),
        ("Spintex_Road", "place", ["Industrial road in eastern Accra"]),
        ("Ho", "city", ["Capital of the Volta Region"]),
        ("Lagos", "city", ["Largest city in Nigeria"]),
        ("Lome", "city", ["Capital of Togo, three hours from Accra by road"]),
        ("Manchester", "city", ["City in the north of England"]),
        ("Aburi", "town", ["Hill town with botanical gardens"]),
        ("Kakum_National_Park", "place", ["Rainforest park in the Central Region"]),
        ("Tema_Motorway", "road", ["Toll road between Accra and Tema"]),
        ("KNUST", "university", ["University of science and technology in Kumasi"]),
        ("Achimota_School", "school", ["Boarding school in Accra founded in 1927"]),
        ("Korle_Bu_Teaching_Hospital", "place", ["Teaching hospital in Accra"]),
        ("Manchester_Royal_Infirmary", "place", ["Hospital on Oxford Road"]),
        ("Nyaho_Medical_Centre", "place", ["Private clinic in Airport Residential Area"]),
        ("University_of_Cape_Coast", "university", ["Public university on the coast road"]),
        ("Kejetia_Market", "place", ["Huge market in central Kumasi"]),
        ("Adum", "place", ["Commercial centre of Kumasi"]),
        ("Waakye", "food", ["Rice and beans cooked with sorghum leaves"]),
        ("Shito", "food", ["Black pepper sauce with dried fish"]),
        ("Kelewele", "food", ["Spiced fried plantain cubes"]),
        ("Malta_Guinness", "drink", ["Non-alcoholic malt drink"]),
        ("Highlife", "music", ["Guitar band music from Ghana"]),
        ("Amakye_Dede", "musician", ["Highlife singer known as the Iron Boy"]),
        ("Asante_Kotoko", "football club", ["Football club from Kumasi"]),
        ("Hearts_of_Oak", "football club", ["Football club from Accra"]),
        ("Trotro", "transport", ["Minibus used as a shared taxi"]),
        ("Kente", "cloth", ["Woven cloth of silk and cotton strips"]),
        ("Bonwire", "town", ["Kente weaving village near Kumasi"]),
        ("Draughts", "game", ["Board game played on a 10 by 10 board"]),
        ("Outdooring", "tradition", ["Naming ceremony held on a baby's eighth day"]),
        ("Energy_Commission", "organization", ["Regulator that licenses solar installers"]),
        ("Lithium_Batteries", "product", ["LiFePO4 cells, 5 kWh per unit"]),
        ("Samsung_Galaxy_A55", "device", ["Phone with a 50 megapixel camera"]),
        ("Tecno_Camon", "device", ["Phone line made by Transsion"]),
        ("The_Beautyful_Ones_Are_Not_Yet_Born", "book", ["Novel by Ayi Kwei Armah, 1968"]),
        ("Polytank", "object", ["Black plastic water tank"]),
        ("Abossey_Okai", "place", ["Spare parts district in Accra"]),
        ("Kaneshie_Market", "place", ["Market in western Accra"]),
        ("Oyarifa", "place", ["Growing suburb on the road to Aburi"]),
        ("Alliance_Francaise_Accra", "place", ["French cultural centre in Airport Residential Area"]),
    ]
    records = entity_records(entities, fillers, ago(300))
    relations = [
        ("default_user", "Efua_Mensah", "married_to"),
        ("Adjoa_Asante", "default_user", "daughter_of"), ("default_user", "Adjoa_Asante", "parent_of"),
        ("Efua_Mensah", "Adjoa_Asante", "parent_of"),
        ("Kofi_Asante", "default_user", "brother_of"), ("Akosua_Lartey", "default_user", "sister_of"),
        ("Kofi_Asante", "Abena_Asante", "married_to"), ("Kwadwo_Asante", "Kofi_Asante", "son_of"),
        ("Abena_Asante", "Kwadwo_Asante", "mother_of"), ("Akosua_Lartey", "Nii_Lartey", "married_to"),
        ("Esi_Lartey", "Akosua_Lartey", "daughter_of"), ("Nii_Lartey", "Esi_Lartey", "father_of"),
        ("Kwaku_Asante", "default_user", "father_of"), ("default_user", "Afua_Asante", "son_of"),
        ("Kwaku_Asante", "Afua_Asante", "married_to"), ("Afua_Asante", "Adjoa_Boakye", "daughter_of"),
        ("Adjoa_Asante", "Adjoa_Boakye", "named_after"),
        ("Efua_Mensah", "Kwesi_Mensah", "daughter_of"), ("Ekua_Mensah", "Efua_Mensah", "mother_of"),
        ("Kwesi_Mensah", "Ekua_Mensah", "married_to"), ("Kobina_Mensah", "Efua_Mensah", "brother_of"),
        ("default_user", "SunTrail_Energy", "co_owns"), ("Yaw_Boateng", "SunTrail_Energy", "co_owns"),
        ("Yaw_Boateng", "default_user", "business_partner_of"), ("Yaw_Boateng", "SunTrail_Install_Crew", "leads"),
        ("SunTrail_Install_Crew", "SunTrail_Energy", "part_of"), ("Emmanuel_Tetteh", "SunTrail_Install_Crew", "member_of"),
        ("Kwabena_Owusu", "SunTrail_Install_Crew", "member_of"), ("Fatima_Issah", "SunTrail_Energy", "works_for"),
        ("Agnes_Quaye", "SunTrail_Energy", "client_of"), ("SunTrail_Energy", "Volta_Star_Senior_High_School", "installed_for"),
        ("Palm_Court_Guesthouse", "SunTrail_Energy", "requested_quote_from"), ("Chidi_Okeke", "SunTrail_Energy", "supplies"),
        ("Kojo_Darko", "default_user", "friend_of"), ("Kojo_Darko", "Zipline_Ghana", "works_at"),
        ("Selorm_Agbodza", "Kojo_Darko", "friend_of"), ("Nana_Yeboah", "default_user", "neighbour_of"),
        ("Ebo_Quansah", "default_user", "friend_of"), ("Ebo_Quansah", "Accra_Cycling_Club", "member_of"),
        ("default_user", "Accra_Cycling_Club", "member_of"), ("default_user", "Road_Bike", "owns"),
        ("default_user", "Toyota_Hilux", "drives"), ("default_user", "Honda_Motorbike", "used_to_ride"),
        ("default_user", "East_Legon_House", "lives_in"),
        ("default_user", "Madina_Flat", "used_to_live_in"), ("default_user", "Simba", "owns"),
        ("Dr_Nana_Ofori", "Simba", "treats"), ("Dr_Nana_Ofori", "Labone_Veterinary_Clinic", "works_at"),
        ("Dr_Ama_Serwaa", "default_user", "treats"), ("Dr_Ama_Serwaa", "Nyaho_Medical_Centre", "works_at"),
        ("default_user", "Madina_Community_Library", "volunteers_at"),
        ("default_user", "Calvary_Methodist_Church", "attends"), ("Efua_Mensah", "Calvary_Methodist_Church", "member_of"),
        ("Efua_Mensah", "Achimota_School", "works_at"), ("Akosua_Lartey", "Manchester_Royal_Infirmary", "works_at"),
        ("Akosua_Lartey", "Korle_Bu_Teaching_Hospital", "worked_at"), ("default_user", "French_Lessons", "takes"),
        ("default_user", "KNUST", "studied_at"),
        ("Kobina_Mensah", "University_of_Cape_Coast", "studies_at"),
    ]
    records += relation_records(relations)
    return records


def _q(category: str, text: str, fact: str | None) -> Asked:
    return Asked(category, text, fact)


FIFTH = [
    _q("direct", "Which seafood am I allergic to?", "Allergic to shellfish, especially prawns"),
    _q("direct", "In what year was I born?", "Born in 1991 in Kumasi"),
    _q("direct", "Where did Abena learn dressmaking?", "Learned dressmaking from her aunt in Techiman"),
    _q("direct", "What does Kofi keep behind his house?", "Keeps rabbits behind his house"),
    _q("direct", "Which languages do I speak?", "Speaks Twi, Fante and English"),
    _q("direct", "When is Efua's birthday?", "Birthday is on 14 August"),
    _q("direct", "How many members does the Accra Cycling Club have?", "About forty members, most of them in their thirties"),
    _q("direct", "What did Dr Serwaa warn me about?", "Warned Kwame his fasting blood sugar was in the prediabetes range"),
    _q("paraphrase", "Do I need specs to see things far away?", "Wears glasses for short-sightedness"),
    _q("paraphrase", "What's my go-to meal?", "Favourite dish is waakye with shito and fried plantain"),
    _q("paraphrase", "What sort of tunes do I put on?", "Listens to highlife, especially old Amakye Dede songs"),
    _q("paraphrase", "Should you ring me or send me an audio clip?", "Prefers voice notes to phone calls"),
    _q("paraphrase", "How early do I wake up?", "Gets up at 5 am to beat the Accra traffic"),
    _q("paraphrase", "Is there a soup I can't bear?", "Hates the taste of okra stew"),
    _q("paraphrase", "Can I serve my wife bacon?", "Does not eat pork"),
    _q("paraphrase", "How do our installers cope with the midday sun?",
       "Works on roofs from 7 am to 3 pm to avoid the afternoon heat"),
    _q("keyword", "okada", "Guards the house and barks at every okada"),
    _q("keyword", "cataract", "Had cataract surgery on his left eye"),
    _q("keyword", "tick collar", "Recommends a tick collar for the rainy season"),
    _q("keyword", "polytank", "Has a polytank on a stand because the water is irregular"),
    _q("keyword", "ICAG", "Is studying for the ICAG accountancy exams"),
    _q("keyword", "wedding kaba", "Made Efua's wedding kaba and slit"),
    _q("keyword", "amlodipine", "Has high blood pressure and takes amlodipine"),
    _q("keyword", "Formula 1", "Loves watching Formula 1 on Sunday afternoons"),
    _q("person", "What part of the business does Yaw look after?", "Handles the installations side and leads the crew"),
    _q("person", "What is Efua's job?", "Teaches mathematics at Achimota School"),
    _q("person", "What does Nana Yeboah hand out from his garden?", "Grows hot peppers and gives them away"),
    _q("person", "How long does Chidi let us take to settle his invoices?", "Gives SunTrail 30 days to pay"),
    _q("person", "Why did Agnes want backup power at her pharmacy?",
       "Ordered a battery backup so her vaccine fridge never goes off"),
    _q("person", "What does Ebo organise for the club?", "Organises the Sunday ride to Aburi"),
    _q("person", "What does Esi want to be?", "Wants to be a doctor when she grows up"),
    _q("person", "What craft did my late grandmother practise?", "Was a kente weaver in Bonwire"),
    _q("temporal", "Which big job did we finish last spring?",
       "Installed a 40-panel system at a senior high school in Ho, the biggest job yet"),
    _q("temporal", "Why did I go to Nigeria last summer?",
       "Went to a solar trade fair in Lagos and met a lithium battery supplier"),
    _q("temporal", "Was I ill at all last autumn?", "Caught malaria and was in bed for a week"),
    _q("temporal", "What trouble did I get into on the road two weeks ago?", "Got a speeding ticket on the Tema motorway"),
    _q("temporal", "What ceremony did we hold last month?", "Held the outdooring of baby Adjoa on her eighth day"),
    _q("temporal", "Which exam did I pass in March?", "Passed the Energy Commission solar installer licence exam"),
    _q("temporal", "Where did I take Efua in 2025?", "Took Efua to Kakum National Park to walk the canopy walkway"),
    _q("temporal", "What class have I started since we moved to East Legon?",
       "Learning French at the Alliance Française on Tuesday evenings"),
    _q("current", "Where am I living these days?", "Moved with Efua into a rented house in East Legon"),
    _q("current", "How do I get to jobs now?", "Bought a used Toyota Hilux pickup to carry panels and ladders"),
    _q("current", "What phone have I got at the moment?", "Upgraded to a Samsung Galaxy A55"),
    _q("current", "What sport am I into nowadays?", "Quit football after twisting a knee and took up road cycling"),
    _q("current", "Do I still drink Malta every day?", "Stopped drinking Malta and fizzy drinks after the prediabetes warning"),
    _q("current", "Where is our workshop now?", "Moved its workshop to a bigger warehouse on Spintex Road"),
    _q("current", "Am I still engaged?", "Married Efua in a traditional ceremony in Cape Coast"),
    _q("current", "Which city is my sister working in at present?",
       "Moved to Manchester to work as a nurse at the Royal Infirmary"),
    _q("relation", "What does my brother's wife do for a living?",
       "Owns a tailoring shop in Adum that sews kente-trimmed dresses"),
    _q("relation", "How many people are on the crew my business partner runs?", "Six installers and two apprentices"),
    _q("relation", "What does the company my university friend works for do?",
       "Delivers blood and medicines to rural clinics by drone"),
    _q("relation", "When is my dog's vet's clinic open at the weekend?", "Opens on Saturdays until 2 pm"),
    _q("relation", "What does my father-in-law own?", "Owns two fishing canoes in Elmina"),
    _q("relation", "What does my friend Kojo's friend in Togo sell?", "Distributes solar batteries and inverters across Togo"),
    _q("relation", "What is my wife's brother studying?", "Studies medicine at the University of Cape Coast"),
    _q("relation", "Which class did my brother's son just start?", "Started Primary 3 at Ejisu Methodist"),
    _q("absent", "Which video games do I play?", None),
    _q("absent", "What is my star sign?", None),
    _q("absent", "Which martial art do I train in?", None),
    _q("absent", "Where do I usually go skiing?", None),
    _q("absent", "Which hospital was Adjoa born in?", None),
    _q("absent", "What car does Kojo drive?", None),
    _q("absent", "When is Simba's birthday?", None),
    _q("absent", "What did Efua study at university?", None),
]

SETS = {"fifth": FIFTH}


def check(today: date) -> None:
    """The memory and its questions hold together on `today` (AssertionError naming what does not)."""
    records = memory(today)
    asked = SETS["fifth"]
    check_memory(records, asked, today, per_category=8)
    # each temporal answer happened within the time its question names, as docs/dates.md reads it
    when = happened(records)
    previous_month_end = today.replace(day=1) - timedelta(days=1)
    spans = {"last spring": (season_start(today, 3), 3), "last summer": (season_start(today, 6), 3),
             "last autumn": (season_start(today, 9), 3), "last month": (previous_month_end.replace(day=1), 1)}
    for item in asked:
        if item.category != "temporal" or item.fact is None:
            continue
        day = when[item.fact]
        for phrase, (start, months) in spans.items():
            if phrase in item.text:
                end_month = start.month + months
                end = date(start.year + (end_month - 1) // 12, (end_month - 1) % 12 + 1, 1)
                assert start <= day < end <= today, f"{item.text!r}: {day} not in {phrase} ({start} to {end})"
        if "two weeks ago" in item.text:
            assert 7 <= (today - day).days <= 21, f"{item.text!r}: {day}"
        if "in March" in item.text:
            assert day.month == 3 and (today - day).days < 366, f"{item.text!r}: {day}"
        if "in 2025" in item.text and today.year >= 2025:
            assert day.year == 2025, f"{item.text!r}: {day}"
        if "since we moved" in item.text:
            assert day > when["Moved with Efua into a rented house in East Legon"], f"{item.text!r}: {day}"


if __name__ == "__main__":
    first = date.today()
    days = [first + timedelta(days=offset) for offset in range(0, 366)]
    days += [date(2026, 3, 1), date(2026, 3, 31), date(2027, 12, 1), date(2028, 2, 29), date(2028, 3, 1)]
    for day in days:
        check(day)
    records = memory(first)
    entities = [record for record in records if record["type"] == "entity"]
    print(f"personal_memory_fifth: checked on {len(days)} days; {len(entities)} entities, "
          f"{sum(len(entity['observations']) for entity in entities)} observations, "
          f"{len(records) - len(entities)} relations, {len(SETS['fifth'])} questions "
          f"({', '.join(f'{c} {sum(1 for q in FIFTH if q.category == c)}' for c in CATEGORIES)})")
