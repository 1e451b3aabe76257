#!/usr/bin/env python3
"""Writes lab_concepts.json from the curated table below.

The table is the source of truth; lab_concepts.json is its committed output
(the crate embeds the JSON with include_str! and validates it on first use).
Run `python3 make_lab_concepts.py > lab_concepts.json` after editing.

Each concept: (canonical name, category, LOINC codes, aliases, MIMIC-IV keys).
MIMIC-IV keys are "label|fluid" from d_labitems: the same label names
different analytes in different fluids ("Glucose" in Blood and in Urine), so
ingesters look up "label|fluid"; for Blood items the bare label is added as
an alias too unless the concept is marked `bare=False`.
"""
import json
import sys

C = []


def c(name, category, loinc=(), aliases=(), mimic=(), bare=True):
    C.append(dict(name=name, category=category, loinc=list(loinc), aliases=list(aliases), mimic=list(mimic), bare=bare))


# --- Myeloma markers and prognostic parameters --------------------------------
c("Kappa free light chain, serum", "myeloma", ["36916-5"],
  ["Free kappa light chains", "Free kappa", "Kappa free light chain", "sFLC kappa", "FLC kappa",
   "Serum free light chain kappa", "Kappa light chains free", "Freie Kappa-Leichtketten",
   "Kappa-Leichtketten frei", "freie Leichtketten Kappa", "FLC-Kappa", "κ free light chain", "freie κ-Leichtketten"],
  ["Free Kappa|Blood"])
c("Lambda free light chain, serum", "myeloma", ["33944-0"],
  ["Free lambda light chains", "Free lambda", "Lambda free light chain", "sFLC lambda", "FLC lambda",
   "Serum free light chain lambda", "Lambda light chains free", "Freie Lambda-Leichtketten",
   "Lambda-Leichtketten frei", "freie Leichtketten Lambda", "FLC-Lambda", "λ free light chain", "freie λ-Leichtketten"],
  ["Free Lambda|Blood"])
c("Kappa/lambda free light chain ratio", "myeloma", ["48378-4"],
  ["Free light chain ratio", "FLC ratio", "sFLC ratio", "Kappa/Lambda ratio", "Kappa lambda ratio",
   "Free kappa/free lambda ratio", "Kappa/Lambda-Quotient", "Kappa-Lambda-Quotient", "Leichtketten-Quotient",
   "FLC-Quotient", "κ/λ ratio", "κ/λ-Quotient"],
  ["Free Kappa/Free Lambda Ratio|Blood"])
c("M-protein, serum", "myeloma", ["33358-3"],
  ["M-protein", "M protein", "M-spike", "M spike", "Monoclonal protein", "Paraprotein", "M-Gradient",
   "M-Komponente", "Monoklonales Protein", "Paraprotein quantitativ"])
c("Serum protein electrophoresis", "myeloma", [],
  ["SPEP", "Protein electrophoresis", "Serum electrophoresis", "Serumelektrophorese", "Eiweißelektrophorese",
   "Elektrophorese"], ["Protein Electrophoresis|Blood"])
c("Immunofixation, serum", "myeloma", [],
  ["Immunofixation", "Serum immunofixation", "IFE", "Immunfixation", "Immunfixation Serum"],
  ["Immunofixation|Blood"])
c("Urine protein electrophoresis", "myeloma", [],
  ["UPEP", "Urine electrophoresis", "Urin-Elektrophorese"], ["Prot. Electrophoresis, Urine|Urine"])
c("Immunofixation, urine", "myeloma", [], ["Urine immunofixation", "Immunfixation Urin"], ["Immunofixation, Urine|Urine"])
c("Immunoglobulin G", "myeloma", ["2465-3"], ["IgG", "Immunoglobulin G, serum", "Immunglobulin G", "IgG im Serum"],
  ["Immunoglobulin G|Blood"])
c("Immunoglobulin A", "myeloma", ["2458-8"], ["IgA", "Immunoglobulin A, serum", "Immunglobulin A", "IgA im Serum"],
  ["Immunoglobulin A|Blood"])
c("Immunoglobulin M", "myeloma", ["2472-9"], ["IgM", "Immunoglobulin M, serum", "Immunglobulin M", "IgM im Serum"],
  ["Immunoglobulin M|Blood"])
c("Immunoglobulin D", "myeloma", [], ["IgD", "Immunglobulin D"])
c("Immunoglobulin E", "immunology", ["19113-0"], ["IgE", "Total IgE", "Immunglobulin E", "IgE gesamt"], ["Immunoglobulin E|Blood"])
c("Beta-2-microglobulin", "myeloma", ["1952-1"],
  ["Beta-2 microglobulin", "Beta 2 microglobulin", "B2M", "β2-microglobulin", "β2-Mikroglobulin",
   "Beta-2-Mikroglobulin", "beta2-Mikroglobulin"], ["Beta-2 Microglobulin|Blood"])
c("Lactate dehydrogenase", "chemistry", ["2532-0", "14804-9"],
  ["LDH", "LD", "Lactate dehydrogenase (LD)", "Lactic dehydrogenase", "Laktatdehydrogenase", "Lactatdehydrogenase"],
  ["Lactate Dehydrogenase (LD)|Blood"])
c("C-reactive protein", "chemistry", ["1988-5", "30522-7"],
  ["CRP", "C reactive protein", "hs-CRP", "C-reaktives Protein", "crp (c-reakt. pr)", "crp (c-reakt. protein)"],
  ["C-Reactive Protein|Blood"])
c("Albumin", "chemistry", ["1751-7", "61151-7"],
  ["Albumin, serum", "Serum albumin", "Albumin im Serum", "Albumin sm", "Alb"], ["Albumin|Blood", "Albumin, Blood|Blood"])
c("Calcium", "chemistry", ["17861-6", "49765-1"],
  ["Calcium, total", "Total calcium", "Serum calcium", "Ca", "Kalzium", "Calcium gesamt", "Calcium im Serum"],
  ["Calcium, Total|Blood"])
c("Creatinine", "chemistry", ["2160-0", "38483-4"],
  ["Serum creatinine", "Creatinine, serum", "Cr", "Creat", "Crea", "Kreatinin", "Kreatinin im Serum", "Creatinin"],
  ["Creatinine|Blood"])
c("Hemoglobin", "hematology", ["718-7", "20509-6"],
  ["Haemoglobin", "Hb", "Hgb", "Hämoglobin", "Haemoglobin (Hb)", "Hemoglobin, calculated"],
  ["Hemoglobin|Blood", "Hemoglobin, Calculated|Blood"])
c("Hemoglobin A1c", "chemistry", ["4548-4", "17856-6"],
  ["HbA1c", "A1c", "Glycated hemoglobin", "Glycosylated hemoglobin", "Haemoglobin A1c", "% Hemoglobin A1c",
   "Hämoglobin A1c", "Glykohämoglobin", "Glykiertes Hämoglobin", "HgbA1c"],
  ["% Hemoglobin A1c|Blood", "Glycated Hemoglobin|Blood"])
c("Estimated average glucose", "chemistry", ["27353-2"], ["eAG"], ["eAG|Blood"])

# --- Basic metabolic panel -------------------------------------------------------
c("Sodium", "chemistry", ["2951-2", "2947-0"], ["Na", "Serum sodium", "Natrium", "Sodium, whole blood"],
  ["Sodium|Blood", "Sodium, Whole Blood|Blood"])
c("Potassium", "chemistry", ["2823-3", "6298-4"], ["K", "Serum potassium", "Kalium", "Potassium, whole blood"],
  ["Potassium|Blood", "Potassium, Whole Blood|Blood"])
c("Chloride", "chemistry", ["2075-0", "2069-3"], ["Cl", "Serum chloride", "Chlorid", "Chloride, whole blood"],
  ["Chloride|Blood", "Chloride, Whole Blood|Blood"])
c("Bicarbonate", "chemistry", ["1963-8", "2028-9", "20565-8"],
  ["HCO3", "Carbon dioxide", "Carbon dioxide, total", "Total CO2", "CO2", "Bikarbonat", "Standardbikarbonat"],
  ["Bicarbonate|Blood"])
c("Calculated total CO2", "blood gas", [], ["Total CO2, calculated", "tCO2 calculated"], ["Calculated Total CO2|Blood"])
c("Urea nitrogen", "chemistry", ["3094-0", "6299-2"],
  ["BUN", "Blood urea nitrogen", "Urea", "Harnstoff", "Harnstoff-N", "Harnstoff-Stickstoff"], ["Urea Nitrogen|Blood"])
c("Glucose", "chemistry", ["2345-7", "2339-0"],
  ["Blood glucose", "Serum glucose", "Glu", "Blutzucker", "Glukose", "Glucose im Serum", "Glucose, whole blood"],
  ["Glucose|Blood"])
c("Anion gap", "chemistry", ["33037-3", "1863-0"], ["AG", "Anionenlücke"], ["Anion Gap|Blood"])
c("Magnesium", "chemistry", ["19123-9", "2601-3"], ["Mg", "Serum magnesium"], ["Magnesium|Blood"])
c("Phosphate", "chemistry", ["2777-1"], ["Phosphorus", "Phosphat", "Anorganisches Phosphat", "PO4"], ["Phosphate|Blood"])
c("Estimated glomerular filtration rate", "chemistry", ["33914-3", "48642-3", "62238-1"],
  ["eGFR", "GFR", "Glomerular filtration rate", "Glomerular filtration rate/1.73 sq M.predicted", "GFR geschätzt",
   "eGFR (CKD-EPI)"])
c("Uric acid", "chemistry", ["3084-1"], ["Urate", "Harnsäure"], ["Uric Acid|Blood"])
c("Osmolality, serum", "chemistry", ["2692-2"], ["Serum osmolality", "Osmolality, measured", "Osmolalität"],
  ["Osmolality, Measured|Blood"])

# --- Liver and other chemistry ------------------------------------------------------
c("Aspartate aminotransferase", "chemistry", ["1920-8"],
  ["AST", "SGOT", "GOT", "ASAT", "Asparate aminotransferase (AST)", "Aspartate aminotransferase (AST)"],
  ["Asparate Aminotransferase (AST)|Blood"])
c("Alanine aminotransferase", "chemistry", ["1742-6"], ["ALT", "SGPT", "GPT", "ALAT", "Alanine aminotransferase (ALT)"],
  ["Alanine Aminotransferase (ALT)|Blood"])
c("Alkaline phosphatase", "chemistry", ["6768-6"], ["ALP", "AP", "Alk phos", "Alkalische Phosphatase"],
  ["Alkaline Phosphatase|Blood"])
c("Bilirubin, total", "chemistry", ["1975-2"], ["Total bilirubin", "Bilirubin", "T bili", "Bilirubin gesamt", "Gesamtbilirubin"],
  ["Bilirubin, Total|Blood"])
c("Bilirubin, direct", "chemistry", ["1968-7"], ["Direct bilirubin", "Conjugated bilirubin", "Bilirubin direkt"],
  ["Bilirubin, Direct|Blood"])
c("Bilirubin, indirect", "chemistry", ["1971-1"], ["Indirect bilirubin", "Bilirubin indirekt"], ["Bilirubin, Indirect|Blood"])
c("Protein, total", "chemistry", ["2885-2"], ["Total protein", "Serum protein", "Gesamteiweiß", "Gesamtprotein", "Eiweiß gesamt"],
  ["Protein, Total|Blood"])
c("Globulin", "chemistry", ["10834-0", "2336-6"], ["Globulins", "Globuline"], ["Globulin|Blood"])
c("Creatine kinase", "chemistry", ["2157-6"], ["CK", "CPK", "Creatine kinase (CK)", "Kreatinkinase"], ["Creatine Kinase (CK)|Blood"])
c("Creatine kinase MB", "chemistry", ["13969-1"], ["CK-MB", "CKMB", "Creatine kinase, MB isoenzyme"],
  ["Creatine Kinase, MB Isoenzyme|Blood"])
c("CK-MB index", "chemistry", [], ["CK-MB relative index"], ["CK-MB Index|Blood"])
c("Troponin T", "chemistry", ["6598-7", "67151-1"], ["cTnT", "hs-TnT", "Troponin T hochsensitiv"], ["Troponin T|Blood"])
c("Lipase", "chemistry", ["3040-3"], [], ["Lipase|Blood"])
c("Amylase", "chemistry", ["1798-8"], [], ["Amylase|Blood"])
c("NT-proBNP", "chemistry", ["33762-6"], ["NTproBNP", "N-terminal pro-BNP", "NT-pro-BNP"], ["NTproBNP|Blood"])
c("Thyroid stimulating hormone", "chemistry", ["3016-3", "11580-8"], ["TSH", "Thyreotropin", "TSH basal"],
  ["Thyroid Stimulating Hormone|Blood"])
c("Thyroxine, free", "chemistry", ["3024-7"], ["Free T4", "fT4", "FT4", "Thyroxine (T4), free", "Freies Thyroxin"],
  ["Thyroxine (T4), Free|Blood"])
c("Cortisol", "chemistry", ["2143-6"], ["Kortisol"], ["Cortisol|Blood"])
c("25-hydroxyvitamin D", "chemistry", ["62292-8", "1989-3"], ["25-OH vitamin D", "Vitamin D", "25-OH-Vitamin D3", "Calcidiol"],
  ["25-OH Vitamin D|Blood"])
c("Vitamin B12", "chemistry", ["2132-9"], ["Cobalamin", "B12"], ["Vitamin B12|Blood"])
c("Folate", "chemistry", ["2284-8"], ["Folic acid", "Folsäure"], ["Folate|Blood"])
c("Ferritin", "chemistry", ["2276-4"], [], ["Ferritin|Blood"])
c("Iron", "chemistry", ["2498-4"], ["Serum iron", "Eisen"], ["Iron|Blood"])
c("Transferrin", "chemistry", ["3034-6"], [], ["Transferrin|Blood"])
c("Iron binding capacity, total", "chemistry", ["2500-7"], ["TIBC", "Iron binding capacity", "Totale Eisenbindungskapazität"],
  ["Iron Binding Capacity, Total|Blood"])
c("Haptoglobin", "chemistry", ["4542-7"], [], ["Haptoglobin|Blood"])
c("Cholesterol, total", "chemistry", ["2093-3"], ["Total cholesterol", "Cholesterol", "Cholesterin", "Gesamtcholesterin"],
  ["Cholesterol, Total|Blood"])
c("HDL cholesterol", "chemistry", ["2085-9"],
  ["High density lipoprotein cholesterol", "HDL", "Cholesterol, HDL", "HDL-Cholesterin"], ["Cholesterol, HDL|Blood"])
c("LDL cholesterol", "chemistry", ["13457-7", "18262-6", "2089-1"],
  ["Low density lipoprotein cholesterol", "LDL", "Cholesterol, LDL, calculated", "Cholesterol, LDL, measured", "LDL-Cholesterin"],
  ["Cholesterol, LDL, Calculated|Blood", "Cholesterol, LDL, Measured|Blood"])
c("Cholesterol/HDL ratio", "chemistry", ["9830-1"], ["Cholesterol ratio (total/HDL)", "Total/HDL cholesterol ratio"],
  ["Cholesterol Ratio (Total/HDL)|Blood"])
c("Triglycerides", "chemistry", ["2571-8"], ["TG", "Triglyceride", "Triglyzeride"], ["Triglycerides|Blood"])
c("Prostate specific antigen", "chemistry", ["2857-1"], ["PSA", "Prostate specific Ag", "Prostataspezifisches Antigen"])
c("Vancomycin", "drug level", ["4092-3"], ["Vancomycin level", "Vancomycin trough"], ["Vancomycin|Blood"])
c("Tacrolimus", "drug level", ["11253-2"], ["FK506", "tacroFK", "Tacrolimus level"], ["tacroFK|Blood"])
c("Digoxin", "drug level", ["10535-3"], ["Digoxin level"], ["Digoxin|Blood"])
c("Barbiturate screen, serum", "toxicology", [], [], ["Barbiturate Screen|Blood"])
c("Benzodiazepine screen, serum", "toxicology", [], [], ["Benzodiazepine Screen|Blood"])
c("Tricyclic antidepressant screen, serum", "toxicology", [], [], ["Tricyclic Antidepressant Screen|Blood"])
c("Lipemia index", "specimen", [], [], ["L|Blood"], bare=False)
c("Hemolysis index", "specimen", [], [], ["H|Blood"], bare=False)
c("Icterus index", "specimen", [], [], ["I|Blood"], bare=False)

# --- Blood gas ---------------------------------------------------------------------
c("pH, blood", "blood gas", ["2744-1", "11558-4"], ["Blood pH", "Arterial pH", "pH arteriell"], ["pH|Blood"])
c("pO2", "blood gas", ["2703-7", "11556-8"], ["Partial pressure of oxygen", "PaO2", "Sauerstoffpartialdruck"], ["pO2|Blood"])
c("pCO2", "blood gas", ["2019-8", "11557-6"], ["Partial pressure of carbon dioxide", "PaCO2", "Kohlendioxidpartialdruck"],
  ["pCO2|Blood"])
c("Base excess", "blood gas", ["11555-0", "1925-7"], ["BE", "Basenüberschuss", "Base excess (BE)"], ["Base Excess|Blood"])
c("Lactate", "blood gas", ["2524-7", "32693-4"], ["Lactic acid", "Laktat", "Lactat"], ["Lactate|Blood"])
c("Ionized calcium", "blood gas", ["1994-3", "17863-2"], ["Free calcium", "Calcium, ionized", "iCa", "Ionisiertes Calcium"],
  ["Free Calcium|Blood"])
c("Oxygen saturation", "blood gas", ["2708-6"], ["O2 saturation", "SaO2", "Sauerstoffsättigung"], ["Oxygen Saturation|Blood"])
c("Hematocrit", "hematology", ["4544-3", "20570-8"],
  ["Hct", "Haematocrit", "Hämatokrit", "Hkt", "Hematocrit, calculated"], ["Hematocrit|Blood", "Hematocrit, Calculated|Blood"])
c("Alveolar-arterial gradient", "blood gas", [], ["A-a gradient"], ["Alveolar-arterial Gradient|Blood"])
c("Blood gas specimen type", "specimen", [], [], ["Specimen Type|Blood"], bare=False)
c("Blood gas temperature", "specimen", [], [], ["Temperature|Blood"], bare=False)
c("Intubated", "specimen", [], [], ["Intubated|Blood"], bare=False)
c("Ventilator", "specimen", [], [], ["Ventilator|Blood"], bare=False)
c("Inspired oxygen", "specimen", [], [], ["Oxygen|Blood"], bare=False)
c("Required O2", "specimen", [], [], ["Required O2|Blood"], bare=False)
c("O2 flow", "specimen", [], [], ["O2 Flow|Blood"], bare=False)
c("PEEP", "specimen", [], [], ["PEEP|Blood"], bare=False)
c("Tidal volume", "specimen", [], [], ["Tidal Volume|Blood"], bare=False)
c("Ventilation rate", "specimen", [], [], ["Ventilation Rate|Blood"], bare=False)
c("Green top hold", "specimen", [], [], ["Green Top Hold (plasma)|Blood"], bare=False)
c("Light green top hold", "specimen", [], [], ["Light Green Top Hold|Blood"], bare=False)
c("Blue top hold", "specimen", [], [], ["Blue Top Hold|Blood"], bare=False)
c("Urine hold", "specimen", [], [], ["Uhold|Urine", "Urine tube, held|Urine"], bare=False)

# --- Haematology ----------------------------------------------------------------
c("Platelet count", "hematology", ["777-3", "26515-7"], ["Platelets", "PLT", "Thrombocytes", "Thrombozyten", "Thrombozytenzahl"],
  ["Platelet Count|Blood"])
c("White blood cell count", "hematology", ["6690-2", "26464-8"],
  ["White blood cells", "WBC", "Leukocytes", "Leukocyte count", "Leukozyten", "Leukozytenzahl"], ["White Blood Cells|Blood"])
c("Red blood cell count", "hematology", ["789-8", "26453-1"],
  ["Red blood cells", "RBC", "Erythrocytes", "Erythrocyte count", "Erythrozyten"], ["Red Blood Cells|Blood"])
c("MCHC", "hematology", ["786-4"], ["Mean corpuscular hemoglobin concentration"], ["MCHC|Blood"])
c("MCV", "hematology", ["787-2"], ["Mean corpuscular volume"], ["MCV|Blood"])
c("MCH", "hematology", ["785-6"], ["Mean corpuscular hemoglobin"], ["MCH|Blood"])
c("RDW", "hematology", ["788-0"], ["Red cell distribution width", "RDW-CV", "Erythrozytenverteilungsbreite"], ["RDW|Blood"])
c("RDW-SD", "hematology", ["21000-5"], ["Erythrocyte distribution width [Entitic volume]"], ["RDW-SD|Blood"])
c("Platelet distribution width", "hematology", ["32207-3"], ["PDW"])
c("Mean platelet volume", "hematology", ["32623-1"], ["MPV", "Platelet mean volume"])
c("Neutrophils", "hematology", ["770-8"], ["Neutrophils %", "Neutrophile", "Neutrophile Granulozyten", "Polys", "Segs"],
  ["Neutrophils|Blood"])
c("Lymphocytes", "hematology", ["736-9"], ["Lymphocytes %", "Lymphozyten", "Lymphs"], ["Lymphocytes|Blood", "Lymphocytes, Percent|Blood"])
c("Monocytes", "hematology", ["5905-5"], ["Monocytes %", "Monozyten", "Monos"], ["Monocytes|Blood"])
c("Eosinophils", "hematology", ["713-8"], ["Eosinophils %", "Eosinophile", "Eos"], ["Eosinophils|Blood"])
c("Basophils", "hematology", ["706-2"], ["Basophils %", "Basophile", "Basos"], ["Basophils|Blood"])
c("Absolute neutrophil count", "hematology", ["751-8"], ["ANC", "Neutrophils absolute", "Neutrophile absolut"],
  ["Absolute Neutrophil Count|Blood"])
c("Absolute lymphocyte count", "hematology", ["731-0"], ["ALC", "Lymphocytes absolute", "Lymphozyten absolut"],
  ["Absolute Lymphocyte Count|Blood"])
c("Absolute monocyte count", "hematology", ["742-7"], ["Monocytes absolute", "Monozyten absolut"], ["Absolute Monocyte Count|Blood"])
c("Absolute eosinophil count", "hematology", ["711-2"], ["Eosinophils absolute", "Eosinophile absolut"],
  ["Absolute Eosinophil Count|Blood"])
c("Absolute basophil count", "hematology", ["704-7"], ["Basophils absolute", "Basophile absolut"], ["Absolute Basophil Count|Blood"])
c("Atypical lymphocytes", "hematology", ["735-1"], ["Reactive lymphocytes"], ["Atypical Lymphocytes|Blood"])
c("Metamyelocytes", "hematology", ["740-1"], [], ["Metamyelocytes|Blood"])
c("Myelocytes", "hematology", ["749-2"], [], ["Myelocytes|Blood"])
c("Promyelocytes", "hematology", [], [], ["Promyelocytes|Blood"])
c("Band neutrophils", "hematology", ["764-1"], ["Bands", "Stabkernige"], ["Bands|Blood"])
c("Blasts", "hematology", [], ["Blasten"], ["Blasts|Blood"])
c("Immature granulocytes", "hematology", [], ["IG", "Unreife Granulozyten"], ["Immature Granulocytes|Blood"])
c("Nucleated red cells", "hematology", [], ["NRBC", "Normoblasten"], ["Nucleated Red Cells|Blood"])
c("Other cells", "hematology", [], [], ["Other Cells|Blood"], bare=False)
c("Reticulocyte count", "hematology", ["4679-7"], ["Reticulocytes", "Retikulozyten", "Reticulocyte count, automated"],
  ["Reticulocyte Count, Automated|Blood"])
c("Reticulocyte count, absolute", "hematology", [], ["Absolute reticulocytes"], ["Reticulocyte Count, Absolute|Blood"])
c("Erythrocyte sedimentation rate", "hematology", ["4537-7", "30341-2"], ["ESR", "Sedimentation rate", "BSG", "Blutsenkung"],
  ["Sedimentation Rate|Blood"])
c("Kappa (flow cytometry)", "hematology", [], [], ["Kappa|Blood", "Kappa|Bone Marrow"], bare=False)
c("Lambda (flow cytometry)", "hematology", [], [], ["Lambda|Blood", "Lambda|Bone Marrow"], bare=False)
c("CD3 cells, percent", "hematology", [], [], ["CD3 Cells, Percent|Blood"])
c("CD4 cells, percent", "hematology", [], [], ["CD4 Cells, Percent|Blood"])
c("CD8 cells, percent", "hematology", [], [], ["CD8 Cells, Percent|Blood"])
c("Absolute CD3 count", "hematology", [], [], ["Absolute CD3 Count|Blood"])
c("Absolute CD8 count", "hematology", [], [], ["Absolute CD8 Count|Blood"])

# --- Coagulation ----------------------------------------------------------------------
c("Partial thromboplastin time", "coagulation", ["3173-2", "14979-9"], ["PTT", "aPTT", "APTT", "Activated partial thromboplastin time"],
  ["PTT|Blood"])
c("Prothrombin time", "coagulation", ["5902-2"], ["PT", "Quick", "Thromboplastinzeit"], ["PT|Blood"])
c("INR", "coagulation", ["6301-6", "34714-6"], ["International normalized ratio", "INR(PT)"], ["INR(PT)|Blood"])
c("Fibrinogen", "coagulation", ["3255-7"], ["Fibrinogen, functional"], ["Fibrinogen, Functional|Blood"])

# --- Urine ------------------------------------------------------------------------------
c("pH, urine", "urine", ["5803-2", "2756-5"], ["Urine pH", "pH of urine", "Urin-pH"], ["pH|Urine"])
c("Specific gravity, urine", "urine", ["5811-5", "2965-2"], ["Urine specific gravity", "Spezifisches Gewicht Urin"],
  ["Specific Gravity|Urine"])
c("Glucose, urine", "urine", ["5792-7", "25428-4", "2350-7"], ["Urine glucose", "Glukose im Urin", "Glucose im Urin"], ["Glucose|Urine"])
c("Protein, urine", "urine", ["5804-0", "20454-5", "2888-6"], ["Urine protein", "Eiweiß im Urin", "Protein im Urin"], ["Protein|Urine"])
c("Ketones, urine", "urine", ["5797-6", "2514-8"], ["Urine ketones", "Ketone", "Ketonkörper im Urin"], ["Ketone|Urine"])
c("Bilirubin, urine", "urine", ["20505-4", "5770-3"], ["Urine bilirubin", "Bilirubin im Urin"], ["Bilirubin|Urine"])
c("Nitrite, urine", "urine", ["5802-4"], ["Urine nitrite", "Nitrit im Urin", "Nitrite"], ["Nitrite|Urine"])
c("Hemoglobin, urine", "urine", ["5794-3"], ["Urine blood", "Blood in urine", "Blut im Urin"], ["Blood|Urine"])
c("Leukocyte esterase, urine", "urine", ["5799-2"], ["Leukocyte esterase", "Urine leukocytes", "Leukozyten im Urin"],
  ["Leukocytes|Urine"])
c("Urobilinogen, urine", "urine", [], ["Urobilinogen"], ["Urobilinogen|Urine"])
c("Color, urine", "urine", ["5778-6"], ["Urine color", "Color of urine", "Farbe Urin"], ["Urine Color|Urine"])
c("Clarity, urine", "urine", ["32167-9"], ["Urine clarity", "Urine appearance", "Clarity of urine", "Aussehen Urin"],
  ["Urine Appearance|Urine"])
c("Odor, urine", "urine", ["5767-9"], ["Urine odor", "Odor of urine"])
c("Red blood cells, urine", "urine", ["13945-1"], ["Urine RBC", "Erythrozyten im Urin"], ["RBC|Urine"])
c("White blood cells, urine", "urine", ["5821-4"], ["Urine WBC", "Leukozyten im Urinsediment"], ["WBC|Urine"])
c("Epithelial cells, urine", "urine", [], ["Urine epithelial cells"], ["Epithelial Cells|Urine"])
c("Yeast, urine", "urine", [], ["Urine yeast"], ["Yeast|Urine"])
c("Hyaline casts, urine", "urine", [], ["Hyaline casts"], ["Hyaline Casts|Urine"])
c("Granular casts, urine", "urine", [], ["Granular casts"], ["Granular Casts|Urine"])
c("Creatinine, urine", "urine", ["2161-8"], ["Urine creatinine", "Kreatinin im Urin"], ["Creatinine, Urine|Urine"])
c("Sodium, urine", "urine", ["2955-3"], ["Urine sodium", "Natrium im Urin"], ["Sodium, Urine|Urine"])
c("Potassium, urine", "urine", ["2829-0"], ["Urine potassium", "Kalium im Urin"], ["Potassium, Urine|Urine"])
c("Chloride, urine", "urine", ["2078-4"], ["Urine chloride"], ["Chloride, Urine|Urine"])
c("Urea nitrogen, urine", "urine", ["3095-7"], ["Urine urea nitrogen", "UUN"], ["Urea Nitrogen, Urine|Urine"])
c("Osmolality, urine", "urine", ["2695-5"], ["Urine osmolality"], ["Osmolality, Urine|Urine"])
c("Protein, total, urine", "urine", ["2888-6"][:0], ["Urine total protein"], ["Total Protein, Urine|Urine"])
c("Albumin, urine", "urine", ["14957-5"], ["Urine albumin", "Microalbumin", "Albumin im Urin"], ["Albumin, Urine|Urine"])
c("Albumin/creatinine ratio, urine", "urine", ["14959-1", "9318-7"],
  ["Microalbumin creatinine ratio", "UACR", "ACR", "Albumin/Kreatinin-Quotient"], ["Albumin/Creatinine, Urine|Urine"])
c("Cocaine screen, urine", "toxicology", [], [], ["Cocaine, Urine|Urine"])
c("Amphetamine screen, urine", "toxicology", [], [], ["Amphetamine Screen, Urine|Urine"])
c("Benzodiazepine screen, urine", "toxicology", [], [], ["Benzodiazepine Screen, Urine|Urine"])
c("Barbiturate screen, urine", "toxicology", [], [], ["Barbiturate Screen, Urine|Urine"])
c("Methadone screen, urine", "toxicology", [], [], ["Methadone, Urine|Urine"])
c("Opiate screen, urine", "toxicology", [], [], ["Opiate Screen, Urine|Urine"])
c("Hemoglobin, stool (occult blood)", "stool", ["57905-2"],
  ["Fecal occult blood", "FOBT", "FIT", "Hemoglobin.gastrointestinal in stool", "Okkultes Blut im Stuhl"])

# --- Ascites -------------------------------------------------------------------------------
c("Lymphocytes, ascites", "body fluid", [], [], ["Lymphocytes|Ascites"])
c("Monocytes, ascites", "body fluid", [], [], ["Monocytes|Ascites"])
c("Polymorphonuclear cells, ascites", "body fluid", [], [], ["Polys|Ascites"])
c("Total nucleated cells, ascites", "body fluid", [], [], ["Total Nucleated Cells, Ascites|Ascites"])
c("Macrophages, ascites", "body fluid", [], [], ["Macrophage|Ascites"])
c("Red blood cells, ascites", "body fluid", [], [], ["RBC, Ascites|Ascites"])

# --- Allergen-specific IgE (Synthea) ---------------------------------------------------------
for allergen, code in [("Peanut", "6206-7"), ("Walnut", "6273-7"), ("Codfish", "6082-2"), ("Shrimp", "6246-3"),
                       ("Wheat", "6276-0"), ("Egg white", "6106-9"), ("Soybean", "6248-9"), ("Cow milk", "7258-7"),
                       ("White oak", "6189-5"), ("Common ragweed", "6085-5"), ("Cat dander", "6833-8"),
                       ("American house dust mite", "6095-4"), ("Cladosporium herbarum", "6075-6"),
                       ("Honey bee", "6844-5"), ("Latex", "6158-0")]:
    c(f"{allergen} IgE", "allergy", [code], [f"{allergen} IgE Ab", f"{allergen} IgE Ab in Serum"])


def main():
    concepts = []
    for x in C:
        aliases = list(x["aliases"])
        for key in x["mimic"]:
            aliases.append(key)
            label, fluid = key.split("|")
            if x["bare"] and fluid == "Blood":
                aliases.append(label)
        seen = set()
        uniq = []
        for a in aliases:
            if a.lower() not in seen and a.lower() != x["name"].lower():
                seen.add(a.lower())
                uniq.append(a)
        out = {"name": x["name"], "category": x["category"]}
        if x["loinc"]:
            out["loinc"] = x["loinc"]
        out["aliases"] = uniq
        concepts.append(out)
    doc = {
        "about": "Evident lab-concept catalogue. Generated by make_lab_concepts.py from its curated table; "
                 "MIMIC-IV d_labitems labels appear as 'label|fluid' aliases. Units and reference ranges are "
                 "deliberately absent: they stay as the source gives them.",
        "version": 1,
        "concepts": concepts,
        "aliases": [],
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


main()
