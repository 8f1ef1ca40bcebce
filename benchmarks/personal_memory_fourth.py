"""A fourth personal memory, written apart from the ranking code, and its questions.

An airline pilot in South Korea in his early forties: divorced and sharing custody of two
children, a new girlfriend, parents in a fishing town, a sister's and a brother's families,
his former in-laws, colleagues at two airlines, a dog, doctors, a freediving club. Two years of
dated events counted back from `today` (one of them in a named year, 2025), facts that change
(three homes, two airlines and a promotion, a car, a phone, a diet, golf given up for
freediving, a marriage ended and a relationship begun), and small things that answer nothing.
Built as the README's prompt builds a memory: ``default_user`` for the user, relations in active
voice (some kin stored from either end), one fact per observation, ``happenedOn`` dates.

One question set, ``fourth``: eight questions per category, written before any ranker answered
them, each naming the observation that answers it (None: the memory never says).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from personal_memory import (
    CATEGORIES,
    Asked,
    check_memory,
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

    spring = season_start(today, 3) + timedelta(days=36)   # early April of the last spring
    summer = season_start(today, 6) + timedelta(days=48)   # mid-July of the last summer
    autumn = season_start(today, 9) + timedelta(days=24)   # late September of the last autumn
    winter = season_start(today, 12) + timedelta(days=45)  # mid-January of the last winter
    march = month_start(today, 3) + timedelta(days=11)
    last_month = (today.replace(day=1) - timedelta(days=1)).replace(day=1) + timedelta(days=13)
    entities: list[tuple[str, str, list[tuple[str, str | None]]]] = [
        ("default_user", "person", [
            ("Name is Seo Minjun, friends call him MJ", ago(720)),
            ("Born in 1984 in Tongyeong, a fishing town on the south coast", ago(720)),
            ("Lives in an apartment in Songdo, Incheon with Hyejin and the kids", ago(715)),
            ("Works as a first officer on the Airbus A321 at Haneul Air, based at Gimpo", ago(715)),
            ("Drives a white 2017 Hyundai Sonata", ago(700)),
            ("Uses a Galaxy S21", ago(690)),
            ("Plays golf most weekends with pilots from Haneul Air", ago(680)),
            ("Loves Korean barbecue, especially pork belly", ago(660)),
            ("Big fan of the Lotte Giants baseball team", ago(650)),
            ("Speaks English and some Japanese", ago(640)),
            ("Is afraid of snakes", ago(610)),
            ("Cannot stand coriander, says it tastes like soap", ago(600)),
            ("Has mild tinnitus in the left ear", ago(560)),
            ("Separated from Hyejin and moved into an officetel in Mapo, Seoul", ago(540)),
            ("Likes his coffee as a plain americano", ago(500)),
            ("Divorce from Hyejin was finalised; they share custody of the children", ago(470)),
            ("Upgraded to captain on the A321 at Haneul Air", ago(400)),
            ("Stopped drinking alcohol after a bad liver test at the annual medical", ago(330)),
            ("Needs reading glasses for small print now", ago(300)),
            ("Takes omega-3 capsules with breakfast", ago(250)),
            ("Saving up to take the kids to see the northern lights in Norway", ago(210)),
            ("Gave up golf and took up freediving instead", ago(190)),
            ("Left Haneul Air and joined Gaya Air in Busan as a captain on the Boeing 737", ago(170)),
            ("Switched to a Galaxy Z Flip 6 after dropping the old phone in the sea", ago(160)),
            ("Flies about 75 hours a month", ago(160)),
            ("Moved to a two-bedroom flat in Haeundae, Busan, ten minutes from the beach", ago(150)),
            ("Sold the Sonata and bought a grey Kia EV6", ago(140)),
            ("Co-parenting schedule: the kids stay with him every other weekend and half of each school holiday",
             ago(140)),
            ("Started dating Kang Seoyeon, a ceramicist he met at the freediving pool", ago(120)),
            ("Eats pescatarian now, no meat but fish and seafood", ago(95)),
            ("Can hold his breath for four minutes in the pool", ago(45)),
            ("Was made a line training captain, teaching new first officers", ago(25)),
            ("Had a bird strike on approach into Gimhae and landed safely", ago(21)),
            ("Got a speeding camera fine on the Gwangan Bridge", ago(9)),
            ("Bought a 5 mm open-cell wetsuit for winter dives", ago(4)),
            ("Ran the Seoul Marathon in 2025 in 3 hours 58 minutes", "2025-03-16"),
            ("Passed the six-monthly simulator check with no repeats", march.isoformat()),
            ("Took Haeun and Doyun to the cherry blossom festival in Jinhae", spring.isoformat()),
            ("Took the kids to the Boryeong Mud Festival and got mud everywhere", summer.isoformat()),
            ("Spent Chuseok at his parents' house in Tongyeong", autumn.isoformat()),
            ("Went skiing at Yongpyong with the kids, Doyun's first time on skis", winter.isoformat()),
            ("Went to Haeun's cello recital at her school", last_month.isoformat()),
        ]),
        ("Yoon_Hyejin", "person", [
            ("Dermatologist who runs her own clinic in Songdo", ago(700)),
            ("Plays tennis on Wednesday evenings", ago(400)),
            ("Was married to Minjun for fourteen years", ago(470)),
            ("Lives in the Songdo apartment with the children", ago(470)),
            ("Gets on with Minjun for the children's sake", ago(300)),
        ]),
        ("Seo_Haeun", "person", [
            ("Daughter of Minjun and Hyejin, born in 2012", ago(715)),
            ("Plays the cello in the school orchestra", ago(600)),
            ("Is allergic to shrimp", ago(500)),
            ("Got her first smartphone, a hand-me-down iPhone", ago(380)),
            ("Wants to become a marine biologist", ago(200)),
            ("Is in her second year of middle school", ago(100)),
        ]),
        ("Seo_Doyun", "person", [
            ("Son of Minjun and Hyejin, born in 2016", ago(715)),
            ("Has a yellow belt in taekwondo", ago(400)),
            ("Collects Pokémon cards and trades them at school", ago(300)),
            ("Broke his arm falling off the monkey bars", ago(240)),
            ("Moved up to a blue belt in taekwondo", ago(60)),
            ("Wants a hamster for his birthday", ago(50)),
        ]),
        ("Kang_Seoyeon", "person", [
            ("Ceramicist with a studio in Gijang", ago(120)),
            ("Makes moon jars and sells them at a gallery in Jeonpo", ago(115)),
            ("Is a freediver too, and dives deeper than Minjun", ago(110)),
            ("Is vegan", ago(100)),
            ("Birthday is on September 9", ago(100)),
        ]),
        ("Seo_Byungchul", "person", [
            ("Minjun's father", ago(720)),
            ("Retired fisherman who still keeps a small boat in Tongyeong harbour", ago(700)),
            ("Walks up Mireuksan every morning", ago(500)),
            ("Had cataract surgery on both eyes", ago(280)),
        ]),
        ("Kim_Miok", "person", [
            ("Minjun's mother", ago(720)),
            ("Sells dried anchovies at Jungang Market in Tongyeong", ago(690)),
            ("Has arthritis in her hands", ago(420)),
            ("Learning to use video calls to see the grandchildren", ago(350)),
            ("Won a senior citizens' singing contest with a trot song", ago(230)),
        ]),
        ("Choi_Geumja", "person", [
            ("Hyejin's mother", ago(700)),
            ("Lives in Suwon", ago(700)),
            ("Still sends Minjun a box of homemade kimchi every winter", ago(380)),
            ("Had a knee operation", ago(200)),
        ]),
        ("Yoon_Sangho", "person", [
            ("Hyejin's father, a retired bank manager", ago(700)),
            ("Plays baduk in the park every afternoon", ago(650)),
        ]),
        ("Seo_Eunji", "person", [
            ("Minjun's older sister", ago(720)),
            ("Teaches third grade at an elementary school in Changwon", ago(690)),
            ("Does calligraphy on weekends", ago(500)),
            ("Was promoted to principal of Sangnam Elementary School in Changwon", ago(200)),
        ]),
        ("Lee_Jaewon", "person", [
            ("Eunji's husband", ago(690)),
            ("Firefighter with the Changwon fire department", ago(650)),
            ("Brews his own makgeolli at home", ago(400)),
            ("Was injured in a warehouse fire and is on leave", ago(70)),
        ]),
        ("Lee_Taemin", "person", [
            ("Eunji and Jaewon's son, born in 2005", ago(650)),
            ("Doing his military service in the navy", ago(300)),
            ("Is stationed on a destroyer out of Jinhae", ago(200)),
        ]),
        ("Lee_Sooah", "person", [
            ("Eunji and Jaewon's daughter", ago(650)),
            ("Studies architecture at Hanyang University in Seoul", ago(400)),
            ("Won a student design prize for a floating library", ago(80)),
        ]),
        ("Seo_Minho", "person", [
            ("Minjun's younger brother", ago(720)),
            ("Draws a webtoon about a ghost who runs a convenience store", ago(650)),
            ("Lives in Mangwon-dong, Seoul", ago(640)),
            ("Has a corgi named Mandu", ago(500)),
            ("Got engaged to Jung Yuna", ago(110)),
        ]),
        ("Jung_Yuna", "person", [
            ("Minho's fiancée", ago(110)),
            ("Radio producer on a late-night music show", ago(300)),
            ("Grew up in Jeju", ago(300)),
            ("Wants a small wedding on Jeju", ago(100)),
        ]),
        ("Mandu", "dog", [
            ("Pembroke corgi, five years old", ago(500)),
            ("Has his own Instagram account with 3,000 followers", ago(400)),
        ]),
        ("Bori", "dog", [
            ("Jindo dog, cream coloured, rescued from a shelter in Gimpo", ago(450)),
            ("Is scared of thunder", ago(300)),
            ("Vet is Dr. Park at Haeundae Animal Hospital", ago(140)),
            ("Stays with the neighbour across the hall when Minjun flies", ago(140)),
            ("Was treated for a tick bite", ago(35)),
        ]),
        ("Haneul_Air", "company", [
            ("Full-service airline based at Gimpo", ago(715)),
            ("Minjun flew A321s there for eleven years", ago(170)),
            ("Was bought by a bigger airline group", ago(90)),
        ]),
        ("Gaya_Air", "company", [
            ("Low-cost airline based at Gimhae Airport in Busan", ago(170)),
            ("Flies Boeing 737s to Japan, Taiwan and Vietnam", ago(170)),
            ("Started a new route to Sapporo", ago(60)),
        ]),
        ("Oh_Sangwoo", "person", [
            ("Chief pilot of the 737 fleet at Gaya Air and Minjun's boss", ago(165)),
            ("Former air force fighter pilot", ago(160)),
            ("Runs the monthly safety meeting", ago(150)),
            ("Collects model aircraft", ago(100)),
        ]),
        ("Fleet_737", "team", [
            ("Gaya Air's Boeing 737 fleet of 28 aircraft", ago(165)),
            ("Has about 120 pilots", ago(165)),
            ("Roster is published on the 20th of each month", ago(150)),
        ]),
        ("Bae_Narae", "person", [
            ("First officer at Gaya Air who often flies with Minjun", ago(150)),
            ("Used to be a flight attendant", ago(150)),
            ("Is training for an Ironman in Gurye", ago(90)),
        ]),
        ("Moon_Jaehee", "person", [
            ("Captain at Haneul Air who trained Minjun", ago(700)),
            ("Retired and now teaches at a flight school in Cheongju", ago(250)),
        ]),
        ("Han_Jisung", "person", [
            ("Friend from flight training in Arizona", ago(700)),
            ("Flies Boeing 747 freighters for a cargo airline out of Anchorage", ago(600)),
            ("Visits Korea every Christmas", ago(340)),
        ]),
        ("Marco_Bellini", "person", [
            ("Jisung's friend from Anchorage, met at Christmas dinner", ago(340)),
            ("Imports Italian wine to Korea through a shop in Itaewon", ago(340)),
            ("Is learning Korean on Duolingo", ago(300)),
        ]),
        ("Park_Dongha", "person", [
            ("Neighbour across the hall in Haeundae", ago(145)),
            ("Runs a raw fish restaurant at Millak market", ago(140)),
        ]),
        ("Dr_Hwang", "person", [
            ("Aviation medical examiner in Busan who does Minjun's class 1 medical", ago(140)),
            ("Told Minjun to cut down on salt", ago(120)),
        ]),
        ("Dr_Shin", "person", [
            ("ENT doctor in Seoul who checked the tinnitus", ago(555)),
            ("Said the tinnitus is from years of cockpit noise", ago(550)),
        ]),
        ("Haeundae_Freediving_Club", "group", [
            ("Freediving club that trains at the Sajik swimming pool on Tuesday nights", ago(145)),
            ("Instructor is Go Eunbi, a former national record holder", ago(140)),
            ("Does sea sessions off Songjeong beach when the water is warm", ago(135)),
        ]),
        ("Haeundae_Flat", "home", [
            ("Two-bedroom flat on the 14th floor with a view of the sea", ago(150)),
            ("The landlord wants a bigger deposit when the lease renews", ago(40)),
        ]),
        ("Kia_EV6", "car", [
            ("Grey Kia EV6 GT-Line", ago(140)),
            ("Charges in the apartment garage overnight", ago(130)),
        ]),
        ("Hyundai_Sonata", "car", [
            ("White 2017 Hyundai Sonata, bought new", ago(700)),
            ("Had its bumper dented in a car park in Mapo", ago(400)),
        ]),
    ]
    # Small things that answer none of the questions.
    fillers = [
        ("Tongyeong", "city", ["Harbour town in South Gyeongsang known for oysters"]),
        ("Busan", "city", ["Korea's second city and largest port"]),
        ("Haeundae", "place", ["Beach district in eastern Busan"]),
        ("Songdo", "place", ["New town on reclaimed land in Incheon"]),
        ("Mapo", "place", ["District in western Seoul along the Han river"]),
        ("Changwon", "city", ["Industrial city next to Masan"]),
        ("Suwon", "city", ["City south of Seoul with an old fortress"]),
        ("Jinhae", "place", ["Naval port famous for its cherry trees"]),
        ("Boryeong", "city", ["Town on the west coast with a long beach"]),
        ("Yongpyong", "place", ["Ski resort in Gangwon province"]),
        ("Gimhae_Airport", "place", ["Busan's airport, west of the city"]),
        ("Gimpo_Airport", "place", ["Seoul's airport for domestic and short-haul flights"]),
        ("Jungang_Market", "place", ["Traditional market by Tongyeong harbour"]),
        ("Mireuksan", "place", ["Mountain above Tongyeong with a cable car"]),
        ("Gwangan_Bridge", "place", ["Suspension bridge across Gwangalli bay, lit up at night"]),
        ("Sajik_Pool", "place", ["Public swimming pool with a 5 m diving well"]),
        ("Sajik_Stadium", "place", ["Home ground of the Lotte Giants"]),
        ("Lotte_Giants", "team", ["Baseball team from Busan"]),
        ("Anchorage", "city", ["City in Alaska with a large cargo hub"]),
        ("Itaewon", "place", ["International neighbourhood in Seoul"]),
        ("Cheongju_Flight_School", "organization", ["Flight school at Cheongju airport"]),
        ("Hanyang_University", "organization", ["University in Seoul"]),
        ("Sangnam_Elementary_School", "organization", ["School of 600 pupils in Changwon"]),
        ("Changwon_Fire_Department", "organization", ["Fire service of Changwon city"]),
        ("Polar_Cargo", "company", ["Cargo airline flying 747 freighters"]),
        ("Gijang_Studio", "place", ["Pottery studio with a wood-fired kiln"]),
        ("Jeonpo_Gallery", "place", ["Small gallery on Jeonpo cafe street"]),
        ("Haeundae_Animal_Hospital", "place", ["Animal hospital near Haeundae station"]),
        ("Songdo_Apartment", "home", ["Apartment on the 22nd floor near Central Park"]),
        ("Hyejin_Skin_Clinic", "organization", ["Dermatology clinic in Songdo"]),
        ("Golf_Society", "group", ["Haneul Air pilots' golf group"]),
        ("Seoul_Marathon", "event", ["Spring marathon through central Seoul"]),
        ("Jinhae_Festival", "event", ["Cherry blossom festival each April"]),
        ("Boryeong_Mud_Festival", "event", ["Summer festival with mud slides and mud pools"]),
        ("Chuseok", "holiday", ["Harvest holiday with ancestral rites and songpyeon"]),
        ("Airbus_A321", "aircraft", ["Narrow-body jet with about 200 seats"]),
        ("Boeing_737", "aircraft", ["Narrow-body jet, the 737-8 version"]),
        ("Simulator_Check", "routine", ["Proficiency check in the full-flight simulator"]),
        ("Galaxy_Z_Flip_6", "device", ["Folding phone in mint"]),
        ("Galaxy_S21", "device", ["Phantom black, bought in 2021"]),
        ("Wetsuit", "gear", ["Made to measure in a shop in Gwangalli"]),
        ("Pokemon_Cards", "collection", ["Doyun's binder holds about 400 cards"]),
        ("Ghost_Convenience_Store", "webtoon", ["Published weekly on Naver"]),
        ("Makgeolli", "drink", ["Rice wine, brewed in a big earthen jar"]),
        ("Baduk", "game", ["Board game also known as go"]),
        ("Moon_Jar", "craft", ["Large round white porcelain jar"]),
        ("Northern_Lights_Trip", "plan", ["Tromsø some winter"]),
        ("Omega_3", "supplement", ["1000 mg capsules"]),
        ("Reading_Glasses", "device", ["+1.25, kept in the flight bag"]),
        ("Songdo_Tennis_Club", "group", ["Outdoor hard courts by the canal"]),
    ]
    records = entity_records(entities, fillers, ago(3))
    relations = [
        ("default_user", "Yoon_Hyejin", "divorced_from"), ("default_user", "Kang_Seoyeon", "dating"),
        ("Seo_Haeun", "default_user", "daughter_of"), ("Seo_Haeun", "Yoon_Hyejin", "daughter_of"),
        ("default_user", "Seo_Doyun", "parent_of"), ("Yoon_Hyejin", "Seo_Doyun", "mother_of"),
        ("Seo_Byungchul", "default_user", "father_of"), ("default_user", "Kim_Miok", "son_of"),
        ("Seo_Byungchul", "Kim_Miok", "married_to"),
        ("Choi_Geumja", "Yoon_Hyejin", "mother_of"), ("Yoon_Sangho", "Yoon_Hyejin", "father_of"),
        ("Yoon_Sangho", "Choi_Geumja", "married_to"),
        ("Seo_Eunji", "default_user", "sister_of"), ("Lee_Jaewon", "Seo_Eunji", "married_to"),
        ("Lee_Taemin", "Seo_Eunji", "son_of"), ("Lee_Jaewon", "Lee_Taemin", "father_of"),
        ("Lee_Sooah", "Lee_Jaewon", "daughter_of"), ("Seo_Eunji", "Lee_Sooah", "mother_of"),
        ("Seo_Minho", "default_user", "brother_of"), ("Seo_Minho", "Jung_Yuna", "engaged_to"),
        ("Seo_Minho", "Mandu", "owns"), ("default_user", "Bori", "owns"),
        ("Bori", "Haeundae_Animal_Hospital", "treated_at"), ("Park_Dongha", "Bori", "looks_after"),
        ("Park_Dongha", "default_user", "neighbour_of"),
        ("default_user", "Haneul_Air", "worked_at"), ("default_user", "Gaya_Air", "works_at"),
        ("Oh_Sangwoo", "default_user", "manages"), ("Oh_Sangwoo", "Fleet_737", "leads"),
        ("Oh_Sangwoo", "Gaya_Air", "works_at"), ("default_user", "Fleet_737", "member_of"),
        ("Bae_Narae", "Fleet_737", "member_of"), ("Bae_Narae", "default_user", "colleague_of"),
        ("Moon_Jaehee", "default_user", "trained"), ("Moon_Jaehee", "Cheongju_Flight_School", "teaches_at"),
        ("Han_Jisung", "default_user", "friend_of"), ("Marco_Bellini", "Han_Jisung", "friend_of"),
        ("Han_Jisung", "Polar_Cargo", "works_at"),
        ("default_user", "Dr_Hwang", "patient_of"), ("default_user", "Dr_Shin", "patient_of"),
        ("default_user", "Haeundae_Freediving_Club", "member_of"),
        ("Kang_Seoyeon", "Haeundae_Freediving_Club", "member_of"), ("Kang_Seoyeon", "Gijang_Studio", "owns"),
        ("default_user", "Golf_Society", "left"), ("default_user", "Lotte_Giants", "supports"),
        ("default_user", "Haeundae_Flat", "lives_in"), ("Yoon_Hyejin", "Songdo_Apartment", "lives_in"),
        ("Seo_Haeun", "Songdo_Apartment", "lives_in"), ("Seo_Doyun", "Songdo_Apartment", "lives_in"),
        ("default_user", "Kia_EV6", "drives"), ("default_user", "Hyundai_Sonata", "used_to_drive"),
        ("Yoon_Hyejin", "Hyejin_Skin_Clinic", "runs"), ("Yoon_Hyejin", "Songdo_Tennis_Club", "member_of"),
        ("Seo_Eunji", "Sangnam_Elementary_School", "works_at"),
        ("Lee_Jaewon", "Changwon_Fire_Department", "works_at"),
        ("Lee_Sooah", "Hanyang_University", "studies_at"), ("Kim_Miok", "Jungang_Market", "sells_at"),
    ]
    records += relation_records(relations)
    return records


def _q(category: str, text: str, fact: str | None) -> Asked:
    return Asked(category, text, fact)


FOURTH = [
    _q("direct", "What animal am I afraid of?", "Is afraid of snakes"),
    _q("direct", "Which baseball team am I a fan of?", "Big fan of the Lotte Giants baseball team"),
    _q("direct", "What does Haeun play in the school orchestra?", "Plays the cello in the school orchestra"),
    _q("direct", "What is Minho's webtoon about?", "Draws a webtoon about a ghost who runs a convenience store"),
    _q("direct", "What does Doyun collect and trade?", "Collects Pokémon cards and trades them at school"),
    _q("direct", "What does Jaewon brew?", "Brews his own makgeolli at home"),
    _q("direct", "Which languages do I speak?", "Speaks English and some Japanese"),
    _q("direct", "Which animal hospital does Bori go to?", "Vet is Dr. Park at Haeundae Animal Hospital"),
    _q("paraphrase", "Is there a green herb I refuse to eat?", "Cannot stand coriander, says it tastes like soap"),
    _q("paraphrase", "Do I still have a beer now and then?",
       "Stopped drinking alcohol after a bad liver test at the annual medical"),
    _q("paraphrase", "How long can I stay under without coming up for air?",
       "Can hold his breath for four minutes in the pool"),
    _q("paraphrase", "Any problems with my hearing?", "Has mild tinnitus in the left ear"),
    _q("paraphrase", "What career is Haeun dreaming of?", "Wants to become a marine biologist"),
    _q("paraphrase", "How often do I have Haeun and Doyun with me?",
       "Co-parenting schedule: the kids stay with him every other weekend and half of each school holiday"),
    _q("paraphrase", "Do I take any fish oil pills?", "Takes omega-3 capsules with breakfast"),
    _q("paraphrase", "Why did I get a new handset?", "Switched to a Galaxy Z Flip 6 after dropping the old phone in the sea"),
    _q("keyword", "Ironman", "Is training for an Ironman in Gurye"),
    _q("keyword", "floating library", "Won a student design prize for a floating library"),
    _q("keyword", "wetsuit", "Bought a 5 mm open-cell wetsuit for winter dives"),
    _q("keyword", "northern lights", "Saving up to take the kids to see the northern lights in Norway"),
    _q("keyword", "speed camera fine", "Got a speeding camera fine on the Gwangan Bridge"),
    _q("keyword", "baduk", "Plays baduk in the park every afternoon"),
    _q("keyword", "cataract", "Had cataract surgery on both eyes"),
    _q("keyword", "moon jars", "Makes moon jars and sells them at a gallery in Jeonpo"),
    _q("person", "What kind of doctor is Hyejin?", "Dermatologist who runs her own clinic in Songdo"),
    _q("person", "Where is Yuna from?", "Grew up in Jeju"),
    _q("person", "Which branch of the military is Taemin in?", "Doing his military service in the navy"),
    _q("person", "What happened to Jaewon recently?", "Was injured in a warehouse fire and is on leave"),
    _q("person", "What plane does Jisung fly?", "Flies Boeing 747 freighters for a cargo airline out of Anchorage"),
    _q("person", "What was Narae's job before she became a pilot?", "Used to be a flight attendant"),
    _q("person", "When should I plan something for Seoyeon's birthday?", "Birthday is on September 9"),
    _q("person", "What has Jaehee been doing since he retired?", "Retired and now teaches at a flight school in Cheongju"),
    _q("temporal", "Where did I take the kids last spring?", "Took Haeun and Doyun to the cherry blossom festival in Jinhae"),
    _q("temporal", "What festival did the kids and I go to last summer?",
       "Took the kids to the Boryeong Mud Festival and got mud everywhere"),
    _q("temporal", "Where did I spend the harvest holiday last autumn?", "Spent Chuseok at his parents' house in Tongyeong"),
    _q("temporal", "Which ski resort did I take the children to over the winter?",
       "Went skiing at Yongpyong with the kids, Doyun's first time on skis"),
    _q("temporal", "What happened on one of my flights about three weeks ago?",
       "Had a bird strike on approach into Gimhae and landed safely"),
    _q("temporal", "Which test did I pass in March?", "Passed the six-monthly simulator check with no repeats"),
    _q("temporal", "Which marathon did I run in 2025, and how fast?", "Ran the Seoul Marathon in 2025 in 3 hours 58 minutes"),
    _q("temporal", "What performance did I attend last month?", "Went to Haeun's cello recital at her school"),
    _q("current", "Where's home for me right now?",
       "Moved to a two-bedroom flat in Haeundae, Busan, ten minutes from the beach"),
    _q("current", "Which airline do I fly for now?",
       "Left Haneul Air and joined Gaya Air in Busan as a captain on the Boeing 737"),
    _q("current", "What's my latest position at work?", "Was made a line training captain, teaching new first officers"),
    _q("current", "What car have I got now?", "Sold the Sonata and bought a grey Kia EV6"),
    _q("current", "Which sport have I taken up lately?", "Gave up golf and took up freediving instead"),
    _q("current", "What kind of diet am I on now?", "Eats pescatarian now, no meat but fish and seafood"),
    _q("current", "Am I with anyone at the moment?", "Started dating Kang Seoyeon, a ceramicist he met at the freediving pool"),
    _q("current", "What colour belt is Doyun up to now?", "Moved up to a blue belt in taekwondo"),
    _q("relation", "What does my sister's husband do for a living?", "Firefighter with the Changwon fire department"),
    _q("relation", "How many pilots does my boss's fleet have?", "Has about 120 pilots"),
    _q("relation", "What business is my friend Jisung's friend in?", "Imports Italian wine to Korea through a shop in Itaewon"),
    _q("relation", "What is my niece studying?", "Studies architecture at Hanyang University in Seoul"),
    _q("relation", "How many followers does my brother's dog have?", "Has his own Instagram account with 3,000 followers"),
    _q("relation", "What sport does my ex play midweek?", "Plays tennis on Wednesday evenings"),
    _q("relation", "What does my sister do for work these days?",
       "Was promoted to principal of Sangnam Elementary School in Changwon"),
    _q("relation", "What does my former mother-in-law still send me?",
       "Still sends Minjun a box of homemade kimchi every winter"),
    _q("absent", "What is my favourite K-drama?", None),
    _q("absent", "How much do I earn a year?", None),
    _q("absent", "What is Doyun's hamster called?", None),
    _q("absent", "Which university did Hyejin study at?", None),
    _q("absent", "What is Minho's blood type?", None),
    _q("absent", "What is the name of Sangwoo's cat?", None),
    _q("absent", "Where did I go on my honeymoon?", None),
    _q("absent", "Which church do I go to?", None),
]

SETS = {"fourth": FOURTH}


def check(today: date) -> None:
    """The memory as of `today` holds every answer, every relation's ends, and nothing dated later."""
    check_memory(memory(today), FOURTH, today, per_category=8)


if __name__ == "__main__":
    for days in range(0, 372, 3):  # every third day of the coming year
        check(date.today() + timedelta(days=days))
    print("fourth: checked")
