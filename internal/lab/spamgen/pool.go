package spamgen

// builtinParagraphs is the default pool of legitimate text for Append:
// ordinary prose of the kind spammers paste from news sites and books.
var builtinParagraphs = []string{
	"The committee met on Tuesday afternoon to review the budget for the coming year. Several members asked for more detail on the maintenance costs of the library building before the final vote.",
	"Heavy rain is expected across the northern valleys over the weekend, with temperatures falling sharply on Sunday evening. Farmers have been advised to bring their livestock down from the higher pastures.",
	"She walked along the river until the path turned toward the old mill, where the water ran faster and the willows leaned over the bank as if listening to the current.",
	"The museum will extend its opening hours during the summer months, and guided tours of the new gallery of maritime history will be offered every morning at ten o'clock.",
	"Researchers at the university have published a study showing that children who read aloud to their parents every evening develop a larger vocabulary than their classmates by the age of eight.",
	"The train was late again, so he bought a newspaper and sat on the wooden bench near the ticket office, reading about the harvest festival that the town was planning for the autumn.",
	"Our neighbours planted apple trees along the fence last spring. This year the branches were heavy with fruit, and they invited everyone on the street to come and pick what they could carry.",
	"The council has approved plans for a new cycle path linking the station with the hospital and the secondary school, which should make the morning journey safer for hundreds of pupils.",
	"In the evening the harbour grew quiet. The fishing boats rocked gently at their moorings, and the smell of salt and tar drifted up the narrow streets toward the church on the hill.",
	"Grandmother kept her recipes in a battered notebook with a green cover. Each page was stained with flour and butter, and the margins were full of small notes about what had gone wrong.",
	"The orchestra rehearsed the second movement three times before the conductor was satisfied with the balance between the strings and the woodwinds in the quiet passage near the end.",
	"Volunteers spent the morning clearing litter from the beach and the dunes. By noon they had filled more than forty bags, most of them with plastic bottles and fragments of fishing nets.",
	"The professor reminded the students that the essays were due on Friday and that late submissions would only be accepted with a written explanation from their tutor.",
	"A small bakery opened on the corner of the square last month. Every morning a queue forms outside before seven, and by nine the shelves of bread and pastries are usually empty.",
}
