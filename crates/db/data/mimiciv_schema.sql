-- The MIMIC-IV schema Evident loads: the official tables, column types,
-- primary keys and indexes of MIT-LCP/mimic-code's PostgreSQL build
-- (mimic-iv/buildmimic/postgres/{create,constraint,index}.sql at commit
-- 8bcbd190), written once in this restricted form that crates/db/src/schema.rs
-- reads and validates. Deliberate differences from mimic-code:
--   * CHAR(n) is written VARCHAR(n), so that values read the same on
--     PostgreSQL (no blank padding) and SQLite;
--   * every table also gets an index on each of subject_id, hadm_id,
--     stay_id and itemid it has (and that is not already the leading
--     column of its primary key), which cohort queries join and filter on;
--   * tables marked OPTIONAL may be absent from a MIMIC-IV folder
--     (chartevents is missing from some copies of the demo).
-- Form: one CREATE TABLE per table, columns "name TYPE [NOT NULL]", an
-- optional PRIMARY KEY (...) as its last entry; then CREATE INDEX ON
-- schema.table (columns); statements end with ';'.

CREATE TABLE mimiciv_hosp.admissions (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  admittime TIMESTAMP NOT NULL,
  dischtime TIMESTAMP,
  deathtime TIMESTAMP,
  admission_type VARCHAR(40) NOT NULL,
  admit_provider_id VARCHAR(10),
  admission_location VARCHAR(60),
  discharge_location VARCHAR(60),
  insurance VARCHAR(255),
  language VARCHAR(25),
  marital_status VARCHAR(30),
  race VARCHAR(80),
  edregtime TIMESTAMP,
  edouttime TIMESTAMP,
  hospital_expire_flag SMALLINT,
  PRIMARY KEY (hadm_id)
);
CREATE INDEX ON mimiciv_hosp.admissions (admittime, dischtime, deathtime);
CREATE INDEX ON mimiciv_hosp.admissions (subject_id);

CREATE TABLE mimiciv_hosp.d_hcpcs (
  code VARCHAR(5) NOT NULL,
  category SMALLINT,
  long_description TEXT,
  short_description VARCHAR(180),
  PRIMARY KEY (code)
);

CREATE TABLE mimiciv_hosp.diagnoses_icd (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  seq_num INTEGER NOT NULL,
  icd_code VARCHAR(7),
  icd_version SMALLINT,
  PRIMARY KEY (hadm_id, seq_num, icd_code, icd_version)
);
CREATE INDEX ON mimiciv_hosp.diagnoses_icd (subject_id);

CREATE TABLE mimiciv_hosp.d_icd_diagnoses (
  icd_code VARCHAR(7) NOT NULL,
  icd_version SMALLINT NOT NULL,
  long_title VARCHAR(255),
  PRIMARY KEY (icd_code, icd_version)
);
CREATE INDEX ON mimiciv_hosp.d_icd_diagnoses (long_title);

CREATE TABLE mimiciv_hosp.d_icd_procedures (
  icd_code VARCHAR(7) NOT NULL,
  icd_version SMALLINT NOT NULL,
  long_title VARCHAR(222),
  PRIMARY KEY (icd_code, icd_version)
);
CREATE INDEX ON mimiciv_hosp.d_icd_procedures (long_title);

CREATE TABLE mimiciv_hosp.d_labitems (
  itemid INTEGER NOT NULL,
  label VARCHAR(50),
  fluid VARCHAR(50),
  category VARCHAR(50),
  PRIMARY KEY (itemid)
);
CREATE INDEX ON mimiciv_hosp.d_labitems (label, fluid, category);

CREATE TABLE mimiciv_hosp.drgcodes (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  drg_type VARCHAR(4),
  drg_code VARCHAR(10) NOT NULL,
  description VARCHAR(195),
  drg_severity SMALLINT,
  drg_mortality SMALLINT
);
CREATE INDEX ON mimiciv_hosp.drgcodes (drg_code, drg_type);
CREATE INDEX ON mimiciv_hosp.drgcodes (description, drg_severity);
CREATE INDEX ON mimiciv_hosp.drgcodes (subject_id);
CREATE INDEX ON mimiciv_hosp.drgcodes (hadm_id);

CREATE TABLE mimiciv_hosp.emar_detail (
  subject_id INTEGER NOT NULL,
  emar_id VARCHAR(25) NOT NULL,
  emar_seq INTEGER NOT NULL,
  parent_field_ordinal VARCHAR(10),
  administration_type VARCHAR(50),
  pharmacy_id INTEGER,
  barcode_type VARCHAR(4),
  reason_for_no_barcode TEXT,
  complete_dose_not_given VARCHAR(5),
  dose_due VARCHAR(100),
  dose_due_unit VARCHAR(50),
  dose_given VARCHAR(255),
  dose_given_unit VARCHAR(50),
  will_remainder_of_dose_be_given VARCHAR(5),
  product_amount_given VARCHAR(30),
  product_unit VARCHAR(30),
  product_code VARCHAR(30),
  product_description VARCHAR(255),
  product_description_other VARCHAR(255),
  prior_infusion_rate VARCHAR(40),
  infusion_rate VARCHAR(40),
  infusion_rate_adjustment VARCHAR(50),
  infusion_rate_adjustment_amount VARCHAR(30),
  infusion_rate_unit VARCHAR(30),
  route VARCHAR(10),
  infusion_complete VARCHAR(1),
  completion_interval VARCHAR(50),
  new_iv_bag_hung VARCHAR(1),
  continued_infusion_in_other_location VARCHAR(1),
  restart_interval VARCHAR(2305),
  side VARCHAR(10),
  site VARCHAR(255),
  non_formulary_visual_verification VARCHAR(1)
);
CREATE INDEX ON mimiciv_hosp.emar_detail (pharmacy_id);
CREATE INDEX ON mimiciv_hosp.emar_detail (product_code);
CREATE INDEX ON mimiciv_hosp.emar_detail (route, site, side);
CREATE INDEX ON mimiciv_hosp.emar_detail (product_description);
CREATE INDEX ON mimiciv_hosp.emar_detail (subject_id);

CREATE TABLE mimiciv_hosp.emar (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER,
  emar_id VARCHAR(25) NOT NULL,
  emar_seq INTEGER NOT NULL,
  poe_id VARCHAR(25) NOT NULL,
  pharmacy_id INTEGER,
  enter_provider_id VARCHAR(10),
  charttime TIMESTAMP NOT NULL,
  medication TEXT,
  event_txt VARCHAR(100),
  scheduletime TIMESTAMP,
  storetime TIMESTAMP NOT NULL,
  PRIMARY KEY (emar_id)
);
CREATE INDEX ON mimiciv_hosp.emar (poe_id);
CREATE INDEX ON mimiciv_hosp.emar (pharmacy_id);
CREATE INDEX ON mimiciv_hosp.emar (charttime, scheduletime, storetime);
CREATE INDEX ON mimiciv_hosp.emar (medication);
CREATE INDEX ON mimiciv_hosp.emar (subject_id);
CREATE INDEX ON mimiciv_hosp.emar (hadm_id);

CREATE TABLE mimiciv_hosp.hcpcsevents (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  chartdate DATE,
  hcpcs_cd VARCHAR(5) NOT NULL,
  seq_num INTEGER NOT NULL,
  short_description VARCHAR(180),
  PRIMARY KEY (hadm_id, hcpcs_cd, seq_num)
);
CREATE INDEX ON mimiciv_hosp.hcpcsevents (short_description);
CREATE INDEX ON mimiciv_hosp.hcpcsevents (subject_id);

CREATE TABLE mimiciv_hosp.labevents (
  labevent_id INTEGER NOT NULL,
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER,
  specimen_id INTEGER NOT NULL,
  itemid INTEGER NOT NULL,
  order_provider_id VARCHAR(10),
  charttime TIMESTAMP(0),
  storetime TIMESTAMP(0),
  value VARCHAR(200),
  valuenum DOUBLE PRECISION,
  valueuom VARCHAR(20),
  ref_range_lower DOUBLE PRECISION,
  ref_range_upper DOUBLE PRECISION,
  flag VARCHAR(10),
  priority VARCHAR(7),
  comments TEXT,
  PRIMARY KEY (labevent_id)
);
CREATE INDEX ON mimiciv_hosp.labevents (charttime, storetime);
CREATE INDEX ON mimiciv_hosp.labevents (specimen_id);
CREATE INDEX ON mimiciv_hosp.labevents (subject_id);
CREATE INDEX ON mimiciv_hosp.labevents (hadm_id);
CREATE INDEX ON mimiciv_hosp.labevents (itemid);

CREATE TABLE mimiciv_hosp.microbiologyevents (
  microevent_id INTEGER NOT NULL,
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER,
  micro_specimen_id INTEGER NOT NULL,
  order_provider_id VARCHAR(10),
  chartdate TIMESTAMP(0) NOT NULL,
  charttime TIMESTAMP(0),
  spec_itemid INTEGER NOT NULL,
  spec_type_desc VARCHAR(100) NOT NULL,
  test_seq INTEGER NOT NULL,
  storedate TIMESTAMP(0),
  storetime TIMESTAMP(0),
  test_itemid INTEGER,
  test_name VARCHAR(100),
  org_itemid INTEGER,
  org_name VARCHAR(100),
  isolate_num SMALLINT,
  quantity VARCHAR(50),
  ab_itemid INTEGER,
  ab_name VARCHAR(30),
  dilution_text VARCHAR(10),
  dilution_comparison VARCHAR(20),
  dilution_value DOUBLE PRECISION,
  interpretation VARCHAR(5),
  comments TEXT,
  PRIMARY KEY (microevent_id)
);
CREATE INDEX ON mimiciv_hosp.microbiologyevents (chartdate, charttime, storedate, storetime);
CREATE INDEX ON mimiciv_hosp.microbiologyevents (spec_itemid, test_itemid, org_itemid, ab_itemid);
CREATE INDEX ON mimiciv_hosp.microbiologyevents (micro_specimen_id);
CREATE INDEX ON mimiciv_hosp.microbiologyevents (subject_id);
CREATE INDEX ON mimiciv_hosp.microbiologyevents (hadm_id);

CREATE TABLE mimiciv_hosp.omr (
  subject_id INTEGER NOT NULL,
  chartdate DATE NOT NULL,
  seq_num INTEGER NOT NULL,
  result_name VARCHAR(100) NOT NULL,
  result_value TEXT NOT NULL
);
CREATE INDEX ON mimiciv_hosp.omr (subject_id);

CREATE TABLE mimiciv_hosp.patients (
  subject_id INTEGER NOT NULL,
  gender VARCHAR(1) NOT NULL,
  anchor_age SMALLINT,
  anchor_year SMALLINT NOT NULL,
  anchor_year_group VARCHAR(20) NOT NULL,
  dod DATE,
  PRIMARY KEY (subject_id)
);
CREATE INDEX ON mimiciv_hosp.patients (anchor_age);
CREATE INDEX ON mimiciv_hosp.patients (anchor_year);

CREATE TABLE mimiciv_hosp.pharmacy (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  pharmacy_id INTEGER NOT NULL,
  poe_id VARCHAR(25),
  starttime TIMESTAMP(3),
  stoptime TIMESTAMP(3),
  medication TEXT,
  proc_type VARCHAR(50) NOT NULL,
  status VARCHAR(50),
  entertime TIMESTAMP(3) NOT NULL,
  verifiedtime TIMESTAMP(3),
  route VARCHAR(50),
  frequency VARCHAR(50),
  disp_sched VARCHAR(255),
  infusion_type VARCHAR(15),
  sliding_scale VARCHAR(1),
  lockout_interval VARCHAR(50),
  basal_rate REAL,
  one_hr_max VARCHAR(10),
  doses_per_24_hrs REAL,
  duration REAL,
  duration_interval VARCHAR(50),
  expiration_value INTEGER,
  expiration_unit VARCHAR(50),
  expirationdate TIMESTAMP(3),
  dispensation VARCHAR(50),
  fill_quantity VARCHAR(50),
  PRIMARY KEY (pharmacy_id)
);
CREATE INDEX ON mimiciv_hosp.pharmacy (poe_id);
CREATE INDEX ON mimiciv_hosp.pharmacy (starttime, stoptime);
CREATE INDEX ON mimiciv_hosp.pharmacy (medication);
CREATE INDEX ON mimiciv_hosp.pharmacy (route);
CREATE INDEX ON mimiciv_hosp.pharmacy (subject_id);
CREATE INDEX ON mimiciv_hosp.pharmacy (hadm_id);

CREATE TABLE mimiciv_hosp.poe_detail (
  poe_id VARCHAR(25) NOT NULL,
  poe_seq INTEGER NOT NULL,
  subject_id INTEGER NOT NULL,
  field_name VARCHAR(255) NOT NULL,
  field_value TEXT,
  PRIMARY KEY (poe_id, field_name)
);
CREATE INDEX ON mimiciv_hosp.poe_detail (subject_id);

CREATE TABLE mimiciv_hosp.poe (
  poe_id VARCHAR(25) NOT NULL,
  poe_seq INTEGER NOT NULL,
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER,
  ordertime TIMESTAMP(0) NOT NULL,
  order_type VARCHAR(25) NOT NULL,
  order_subtype VARCHAR(50),
  transaction_type VARCHAR(15),
  discontinue_of_poe_id VARCHAR(25),
  discontinued_by_poe_id VARCHAR(25),
  order_provider_id VARCHAR(10),
  order_status VARCHAR(15),
  PRIMARY KEY (poe_id)
);
CREATE INDEX ON mimiciv_hosp.poe (order_type);
CREATE INDEX ON mimiciv_hosp.poe (subject_id);
CREATE INDEX ON mimiciv_hosp.poe (hadm_id);

CREATE TABLE mimiciv_hosp.prescriptions (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  pharmacy_id INTEGER NOT NULL,
  poe_id VARCHAR(25),
  poe_seq INTEGER,
  order_provider_id VARCHAR(10),
  starttime TIMESTAMP(3),
  stoptime TIMESTAMP(3),
  drug_type VARCHAR(20) NOT NULL,
  drug VARCHAR(255) NOT NULL,
  formulary_drug_cd VARCHAR(50),
  gsn VARCHAR(255),
  ndc VARCHAR(25),
  prod_strength VARCHAR(255),
  form_rx VARCHAR(25),
  dose_val_rx VARCHAR(100),
  dose_unit_rx VARCHAR(50),
  form_val_disp VARCHAR(50),
  form_unit_disp VARCHAR(50),
  doses_per_24_hrs REAL,
  route VARCHAR(50),
  PRIMARY KEY (pharmacy_id, drug_type, drug)
);
CREATE INDEX ON mimiciv_hosp.prescriptions (starttime, stoptime);
CREATE INDEX ON mimiciv_hosp.prescriptions (subject_id);
CREATE INDEX ON mimiciv_hosp.prescriptions (hadm_id);

CREATE TABLE mimiciv_hosp.procedures_icd (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  seq_num INTEGER NOT NULL,
  chartdate DATE NOT NULL,
  icd_code VARCHAR(7),
  icd_version SMALLINT,
  PRIMARY KEY (hadm_id, seq_num, icd_code, icd_version)
);
CREATE INDEX ON mimiciv_hosp.procedures_icd (subject_id);

CREATE TABLE mimiciv_hosp.provider (
  provider_id VARCHAR(10) NOT NULL
);

CREATE TABLE mimiciv_hosp.services (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  transfertime TIMESTAMP NOT NULL,
  prev_service VARCHAR(10),
  curr_service VARCHAR(10),
  PRIMARY KEY (hadm_id, transfertime, curr_service)
);
CREATE INDEX ON mimiciv_hosp.services (subject_id);

CREATE TABLE mimiciv_hosp.transfers (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER,
  transfer_id INTEGER NOT NULL,
  eventtype VARCHAR(10),
  careunit VARCHAR(255),
  intime TIMESTAMP,
  outtime TIMESTAMP,
  PRIMARY KEY (transfer_id)
);
CREATE INDEX ON mimiciv_hosp.transfers (hadm_id);
CREATE INDEX ON mimiciv_hosp.transfers (intime);
CREATE INDEX ON mimiciv_hosp.transfers (careunit);
CREATE INDEX ON mimiciv_hosp.transfers (subject_id);

CREATE TABLE mimiciv_icu.caregiver (
  caregiver_id INTEGER NOT NULL
);

CREATE TABLE mimiciv_icu.chartevents ( -- OPTIONAL
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  stay_id INTEGER NOT NULL,
  caregiver_id INTEGER,
  charttime TIMESTAMP NOT NULL,
  storetime TIMESTAMP,
  itemid INTEGER NOT NULL,
  value VARCHAR(200),
  valuenum FLOAT,
  valueuom VARCHAR(20),
  warning SMALLINT
);
CREATE INDEX ON mimiciv_icu.chartevents (charttime, storetime);
CREATE INDEX ON mimiciv_icu.chartevents (subject_id);
CREATE INDEX ON mimiciv_icu.chartevents (hadm_id);
CREATE INDEX ON mimiciv_icu.chartevents (stay_id);
CREATE INDEX ON mimiciv_icu.chartevents (itemid);

CREATE TABLE mimiciv_icu.datetimeevents (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  stay_id INTEGER NOT NULL,
  caregiver_id INTEGER,
  charttime TIMESTAMP NOT NULL,
  storetime TIMESTAMP,
  itemid INTEGER NOT NULL,
  value TIMESTAMP NOT NULL,
  valueuom VARCHAR(20),
  warning SMALLINT,
  PRIMARY KEY (stay_id, itemid, charttime)
);
CREATE INDEX ON mimiciv_icu.datetimeevents (charttime, storetime);
CREATE INDEX ON mimiciv_icu.datetimeevents (value);
CREATE INDEX ON mimiciv_icu.datetimeevents (subject_id);
CREATE INDEX ON mimiciv_icu.datetimeevents (hadm_id);
CREATE INDEX ON mimiciv_icu.datetimeevents (itemid);

CREATE TABLE mimiciv_icu.d_items (
  itemid INTEGER NOT NULL,
  label VARCHAR(100) NOT NULL,
  abbreviation VARCHAR(50) NOT NULL,
  linksto VARCHAR(30) NOT NULL,
  category VARCHAR(50) NOT NULL,
  unitname VARCHAR(50),
  param_type VARCHAR(20) NOT NULL,
  lownormalvalue FLOAT,
  highnormalvalue FLOAT,
  PRIMARY KEY (itemid)
);
CREATE INDEX ON mimiciv_icu.d_items (label, abbreviation);
CREATE INDEX ON mimiciv_icu.d_items (category);

CREATE TABLE mimiciv_icu.icustays (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  stay_id INTEGER NOT NULL,
  first_careunit VARCHAR(255),
  last_careunit VARCHAR(255),
  intime TIMESTAMP,
  outtime TIMESTAMP,
  los FLOAT,
  PRIMARY KEY (stay_id)
);
CREATE INDEX ON mimiciv_icu.icustays (first_careunit, last_careunit);
CREATE INDEX ON mimiciv_icu.icustays (intime, outtime);
CREATE INDEX ON mimiciv_icu.icustays (subject_id);
CREATE INDEX ON mimiciv_icu.icustays (hadm_id);

CREATE TABLE mimiciv_icu.ingredientevents (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  stay_id INTEGER,
  caregiver_id INTEGER,
  starttime TIMESTAMP NOT NULL,
  endtime TIMESTAMP NOT NULL,
  storetime TIMESTAMP,
  itemid INTEGER NOT NULL,
  amount FLOAT,
  amountuom VARCHAR(20),
  rate FLOAT,
  rateuom VARCHAR(20),
  orderid INTEGER NOT NULL,
  linkorderid INTEGER,
  statusdescription VARCHAR(20),
  originalamount FLOAT,
  originalrate FLOAT
);
CREATE INDEX ON mimiciv_icu.ingredientevents (subject_id);
CREATE INDEX ON mimiciv_icu.ingredientevents (hadm_id);
CREATE INDEX ON mimiciv_icu.ingredientevents (stay_id);
CREATE INDEX ON mimiciv_icu.ingredientevents (itemid);

CREATE TABLE mimiciv_icu.inputevents (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  stay_id INTEGER,
  caregiver_id INTEGER,
  starttime TIMESTAMP NOT NULL,
  endtime TIMESTAMP NOT NULL,
  storetime TIMESTAMP,
  itemid INTEGER NOT NULL,
  amount FLOAT,
  amountuom VARCHAR(20),
  rate FLOAT,
  rateuom VARCHAR(20),
  orderid INTEGER NOT NULL,
  linkorderid INTEGER,
  ordercategoryname VARCHAR(50),
  secondaryordercategoryname VARCHAR(50),
  ordercomponenttypedescription VARCHAR(100),
  ordercategorydescription VARCHAR(30),
  patientweight FLOAT,
  totalamount FLOAT,
  totalamountuom VARCHAR(50),
  isopenbag SMALLINT,
  continueinnextdept SMALLINT,
  statusdescription VARCHAR(20),
  originalamount FLOAT,
  originalrate FLOAT,
  PRIMARY KEY (orderid, itemid)
);
CREATE INDEX ON mimiciv_icu.inputevents (starttime, endtime);
CREATE INDEX ON mimiciv_icu.inputevents (ordercategorydescription);
CREATE INDEX ON mimiciv_icu.inputevents (subject_id);
CREATE INDEX ON mimiciv_icu.inputevents (hadm_id);
CREATE INDEX ON mimiciv_icu.inputevents (stay_id);
CREATE INDEX ON mimiciv_icu.inputevents (itemid);

CREATE TABLE mimiciv_icu.outputevents (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  stay_id INTEGER NOT NULL,
  caregiver_id INTEGER,
  charttime TIMESTAMP(3) NOT NULL,
  storetime TIMESTAMP(3) NOT NULL,
  itemid INTEGER NOT NULL,
  value FLOAT NOT NULL,
  valueuom VARCHAR(20),
  PRIMARY KEY (stay_id, charttime, itemid)
);
CREATE INDEX ON mimiciv_icu.outputevents (charttime, storetime);
CREATE INDEX ON mimiciv_icu.outputevents (subject_id);
CREATE INDEX ON mimiciv_icu.outputevents (hadm_id);
CREATE INDEX ON mimiciv_icu.outputevents (itemid);

CREATE TABLE mimiciv_icu.procedureevents (
  subject_id INTEGER NOT NULL,
  hadm_id INTEGER NOT NULL,
  stay_id INTEGER NOT NULL,
  caregiver_id INTEGER,
  starttime TIMESTAMP NOT NULL,
  endtime TIMESTAMP NOT NULL,
  storetime TIMESTAMP NOT NULL,
  itemid INTEGER NOT NULL,
  value FLOAT,
  valueuom VARCHAR(20),
  location VARCHAR(100),
  locationcategory VARCHAR(50),
  orderid INTEGER,
  linkorderid INTEGER,
  ordercategoryname VARCHAR(50),
  ordercategorydescription VARCHAR(30),
  patientweight FLOAT,
  isopenbag SMALLINT,
  continueinnextdept SMALLINT,
  statusdescription VARCHAR(20),
  originalamount FLOAT,
  originalrate FLOAT,
  PRIMARY KEY (orderid)
);
CREATE INDEX ON mimiciv_icu.procedureevents (starttime, endtime);
CREATE INDEX ON mimiciv_icu.procedureevents (ordercategoryname);
CREATE INDEX ON mimiciv_icu.procedureevents (subject_id);
CREATE INDEX ON mimiciv_icu.procedureevents (hadm_id);
CREATE INDEX ON mimiciv_icu.procedureevents (stay_id);
CREATE INDEX ON mimiciv_icu.procedureevents (itemid);
